//! Pub/Sub (`pubsub.c`): confirmations and messages are push messages (arrays in RESP2).

use super::connection::help_reply;
use super::glob_match;
use crate::redis::client::ClientState;
use crate::redis::reply::Reply;
use crate::redis::server::Ctx;

/// `clientSubscriptionsCount`: channels plus patterns.
fn subscription_count(ctx: &Ctx<'_>) -> i64 {
    ctx.core
        .clients
        .get(&ctx.client)
        .map_or(0, |c| (c.channels.len() + c.patterns.len()) as i64)
}

/// `addReplyPubsubSubscribed` and friends: a push message in RESP3, an array in RESP2.
fn event(kind: &str, channel: Option<&[u8]>, count: i64) -> Reply {
    Reply::Push(vec![
        Reply::bulk(kind),
        channel.map_or(Reply::Nil, Reply::bulk),
        Reply::Integer(count),
    ])
}

/// Channels and patterns are subscribed to alike (`pubsub.c` keeps a server-wide map and a
/// per-client list of each); only their names and where they are kept differ.
#[derive(Clone, Copy)]
enum Target {
    Channel,
    Pattern,
}

impl Target {
    /// The confirmation kinds: (`subscribe`, `unsubscribe`) or (`psubscribe`, `punsubscribe`).
    fn events(self) -> (&'static str, &'static str) {
        match self {
            Target::Channel => ("subscribe", "unsubscribe"),
            Target::Pattern => ("psubscribe", "punsubscribe"),
        }
    }

    /// The client's names of this kind.
    fn of(self, state: &mut ClientState) -> &mut Vec<Vec<u8>> {
        match self {
            Target::Channel => &mut state.channels,
            Target::Pattern => &mut state.patterns,
        }
    }
}

/// SUBSCRIBE / PSUBSCRIBE: one confirmation per name; a client's names are a list in
/// subscription order.
fn join(ctx: &mut Ctx<'_>, argv: &[Vec<u8>], target: Target) -> Reply {
    let mut replies = Vec::new();
    for name in &argv[1..] {
        let names = target.of(ctx.core.clients.entry(ctx.client).or_default());
        if !names.contains(name) {
            names.push(name.clone());
            let server = match target {
                Target::Channel => &mut ctx.core.channels,
                Target::Pattern => &mut ctx.core.patterns,
            };
            server.entry(name.clone()).or_default().push(ctx.client);
        }
        replies.push(event(
            target.events().0,
            Some(name),
            subscription_count(ctx),
        ));
    }
    Reply::Sequence(replies)
}

/// UNSUBSCRIBE / PUNSUBSCRIBE [name ...]: no name means all of them, in subscription order
/// (`pubsubUnsubscribeAllPatterns` walks the client's list); with none subscribed, a single
/// reply with a nil name.
fn leave(ctx: &mut Ctx<'_>, argv: &[Vec<u8>], target: Target) -> Reply {
    let kind = target.events().1;
    let names: Vec<Vec<u8>> = match ctx.core.clients.get_mut(&ctx.client) {
        _ if argv.len() > 1 => argv[1..].to_vec(),
        Some(state) => target.of(state).clone(),
        None => Vec::new(),
    };
    if names.is_empty() {
        return event(kind, None, subscription_count(ctx));
    }
    let mut replies = Vec::new();
    for name in &names {
        if let Some(state) = ctx.core.clients.get_mut(&ctx.client) {
            target.of(state).retain(|n| n != name);
        }
        match target {
            Target::Channel => ctx.core.unsubscribe_channel(ctx.client, name),
            Target::Pattern => ctx.core.unsubscribe_pattern(ctx.client, name),
        }
        replies.push(event(kind, Some(name), subscription_count(ctx)));
    }
    Reply::Sequence(replies)
}

/// SUBSCRIBE channel [channel ...].
pub fn subscribe(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    join(ctx, argv, Target::Channel)
}

/// UNSUBSCRIBE [channel ...].
pub fn unsubscribe(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    leave(ctx, argv, Target::Channel)
}

/// PSUBSCRIBE pattern [pattern ...] (`pubsubSubscribePattern`).
pub fn psubscribe(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    join(ctx, argv, Target::Pattern)
}

/// PUNSUBSCRIBE [pattern ...].
pub fn punsubscribe(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    leave(ctx, argv, Target::Pattern)
}

/// PUBLISH (`pubsubPublishMessage`): `message` to the channel's subscribers, then `pmessage` to
/// the subscribers of every matching pattern (Redis walks its pattern dict in hash order; here
/// patterns go in byte order). Answers the number of deliveries; propagated to replicas.
pub fn publish(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    let (channel, message) = (&argv[1], &argv[2]);
    let subscribers = ctx.core.channels.get(channel).cloned().unwrap_or_default();
    let mut receivers = subscribers.len();
    for &client in &subscribers {
        let msg = Reply::Push(vec![
            Reply::bulk("message"),
            Reply::Bulk(channel.clone()),
            Reply::Bulk(message.clone()),
        ]);
        ctx.core.pushes.push((client, msg));
    }
    let matching: Vec<(Vec<u8>, Vec<u64>)> = ctx
        .core
        .patterns
        .iter()
        .filter(|(pattern, _)| glob_match(pattern, channel, false))
        .map(|(pattern, clients)| (pattern.clone(), clients.clone()))
        .collect();
    for (pattern, clients) in matching {
        receivers += clients.len();
        for client in clients {
            let msg = Reply::Push(vec![
                Reply::bulk("pmessage"),
                Reply::Bulk(pattern.clone()),
                Reply::Bulk(channel.clone()),
                Reply::Bulk(message.clone()),
            ]);
            ctx.core.pushes.push((client, msg));
        }
    }
    ctx.propagate(argv.to_vec());
    Reply::Integer(receivers as i64)
}

const PUBSUB_HELP: &[&str] = &[
    "CHANNELS [<pattern>]",
    "    Return the currently active channels matching a <pattern> (default: '*').",
    "NUMPAT",
    "    Return number of subscriptions to patterns.",
    "NUMSUB [<channel> ...]",
    "    Return the number of subscribers for the specified channels, excluding",
    "    pattern subscriptions(default: no channels).",
    "SHARDCHANNELS [<pattern>]",
    "    Return the currently active shard level channels matching a <pattern> (default: '*').",
    "SHARDNUMSUB [<shardchannel> ...]",
    "    Return the number of subscribers for the specified shard level channel(s)",
];

/// PUBSUB HELP.
pub fn pubsub_help(_ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    help_reply(&argv[0], PUBSUB_HELP)
}

/// `pubsubCommand` answers a subcommand with the wrong count of arguments this way, after the
/// table's arity check (CHANNELS takes at most one pattern).
fn too_many_arguments(argv: &[Vec<u8>]) -> Reply {
    super::connection::subcommand_syntax_error(argv)
}

/// PUBSUB CHANNELS [pattern] (`channelList`): active channels (with a subscriber), matching
/// the pattern. Redis answers in hash order; here in byte order.
pub fn pubsub_channels(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    if argv.len() > 3 {
        return too_many_arguments(argv);
    }
    let pattern = argv.get(2);
    Reply::Array(
        ctx.core
            .channels
            .keys()
            .filter(|c| pattern.is_none_or(|p| glob_match(p, c, false)))
            .map(|c| Reply::Bulk(c.clone()))
            .collect(),
    )
}

/// PUBSUB NUMSUB [channel ...]: channel, subscriber count pairs (pattern subscribers excluded).
pub fn pubsub_numsub(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    let mut out = Vec::new();
    for channel in &argv[2..] {
        let count = ctx.core.channels.get(channel).map_or(0, Vec::len);
        out.push(Reply::Bulk(channel.clone()));
        out.push(Reply::Integer(count as i64));
    }
    Reply::Array(out)
}

/// PUBSUB NUMPAT: the number of distinct patterns with a subscriber.
pub fn pubsub_numpat(ctx: &mut Ctx<'_>, _argv: &[Vec<u8>]) -> Reply {
    Reply::Integer(ctx.core.patterns.len() as i64)
}

/// PUBSUB SHARDCHANNELS [pattern]: no shard channel can be subscribed here (no SSUBSCRIBE).
pub fn pubsub_shardchannels(_ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    if argv.len() > 3 {
        return too_many_arguments(argv);
    }
    Reply::Array(Vec::new())
}

/// PUBSUB SHARDNUMSUB [channel ...]: every shard channel has no subscriber.
pub fn pubsub_shardnumsub(_ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    Reply::Array(
        argv[2..]
            .iter()
            .flat_map(|c| [Reply::Bulk(c.clone()), Reply::Integer(0)])
            .collect(),
    )
}
