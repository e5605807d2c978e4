"""What the scripts that drive `locksim serve` share: a command in RESP's request form."""


def command(*args):
    """One request as a RESP array of bulk strings (what every client sends)."""
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out
