//! Pub/Sub (`pubsub.c`): confirmations and messages are push messages (arrays in RESP2).

use crate::redis::reply::Reply;
use crate::redis::server::Ctx;

fn subscription_count(ctx: &Ctx<'_>) -> i64 {
    ctx.core
        .clients
        .get(&ctx.client)
        .map_or(0, |c| c.channels.len() as i64)
}

/// `addReplyPubsubSubscribed` and friends: a push message in RESP3, an array in RESP2.
fn event(kind: &str, channel: Option<&[u8]>, count: i64) -> Reply {
    Reply::Push(vec![
        Reply::bulk(kind),
        channel.map_or(Reply::Nil, Reply::bulk),
        Reply::Integer(count),
    ])
}

/// SUBSCRIBE: one `subscribe` reply per channel.
pub fn subscribe(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    let mut replies = Vec::new();
    for channel in &argv[1..] {
        let state = ctx.core.clients.entry(ctx.client).or_default();
        if !state.channels.contains(channel) {
            state.channels.push(channel.clone());
            ctx.core
                .channels
                .entry(channel.clone())
                .or_default()
                .push(ctx.client);
        }
        replies.push(event("subscribe", Some(channel), subscription_count(ctx)));
    }
    Reply::Sequence(replies)
}

/// UNSUBSCRIBE [channel ...]: no channel means all of them; with none subscribed a single
/// reply with a nil channel.
pub fn unsubscribe(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    let channels: Vec<Vec<u8>> = if argv.len() > 1 {
        argv[1..].to_vec()
    } else {
        ctx.core
            .clients
            .get(&ctx.client)
            .map(|c| c.channels.clone())
            .unwrap_or_default()
    };
    if channels.is_empty() {
        return event("unsubscribe", None, subscription_count(ctx));
    }
    let mut replies = Vec::new();
    for channel in &channels {
        if let Some(state) = ctx.core.clients.get_mut(&ctx.client) {
            state.channels.retain(|c| c != channel);
        }
        ctx.core.unsubscribe_channel(ctx.client, channel);
        replies.push(event("unsubscribe", Some(channel), subscription_count(ctx)));
    }
    Reply::Sequence(replies)
}

/// PUBLISH: pushes `message` to every subscriber; propagated to replicas.
pub fn publish(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    let subscribers = ctx.core.channels.get(&argv[1]).cloned().unwrap_or_default();
    for &client in &subscribers {
        let msg = Reply::Push(vec![
            Reply::bulk("message"),
            Reply::Bulk(argv[1].clone()),
            Reply::Bulk(argv[2].clone()),
        ]);
        ctx.core.pushes.push((client, msg));
    }
    ctx.propagate(argv.to_vec());
    Reply::Integer(subscribers.len() as i64)
}
