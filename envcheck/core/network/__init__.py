"""The network a rendezvous needs, checked before it starts: stdlib only, every step bounded.

``init_process_group`` across hosts hangs, often for its whole 30-minute default timeout,
when MASTER_ADDR resolves to the wrong place, a firewall drops the port, the host's own
name resolves to a loopback address (Debian's ``127.0.1.1`` line in /etc/hosts), or
gloo or NCCL use an interface that does not reach the other hosts. Each of these is
visible from the host itself in milliseconds (``prechecks.run``); ``compare`` finds the
host that resolved MASTER_ADDR differently from the others, from every rank's records.

- ``resolve``: names to addresses, bounded in time; what is a loopback address;
- ``interfaces``: this host's interfaces and addresses, and the one gloo or NCCL picks;
- ``reach``: a bounded TCP connect, optionally through one interface;
- ``prechecks``: the checks themselves, as plain results a rank records;
- ``compare``: what each host resolved, against the others.
"""
