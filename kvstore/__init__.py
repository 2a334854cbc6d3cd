"""The kvstore: sectorflow's shared state, the Clone pattern of the ZeroMQ Guide (chapter 5).

One server (``sectorflow kvstore --config F``) holds a key-value map and a sequence number; every
service keeps a live replica through a ``Client`` and publishes its own keys through the server.
The server and the client are C++ (``sectorflow::kvstore``, the same code C++ programs link);
this package re-exports them with a thin Pythonic layer (msgpack values, ``from_config``).

Wire protocol (CHP, exactly as the Guide's kvmsg/clonesrv/clone): every message is five frames,
``[key, sequence (8 bytes, big-endian int64), uuid (16 bytes or empty), properties ("name=value\\n"
lines), body (msgpack; empty = delete)]``. The server binds three consecutive ports:

- P, ROUTER: ``["ICANHAZ?", subtree]`` is answered by one KVSYNC per key under the subtree, then
  ``KTHXBAI`` whose sequence is the server's current sequence and whose body is the subtree.
- P+1, PUB: every accepted update (KVPUB) with a new sequence, and ``HUGZ`` every
  ``heartbeat_ms`` carrying the current sequence.
- P+2, SUB: client updates (KVSET). The Guide's clone client sends them from a PUB socket; ours
  from an XPUB, which tells it when the server listens (so no update is sent into the void and a
  restarted server is re-populated at once). A ``ttl`` property (seconds) makes the key expire
  unless set again in time; the expiry is published as a deletion.

Malformed messages are dropped and counted. The server is bounded (``ServerOptions``, from the
``[kvstore]`` table): values of at most ``max_value_bytes`` (ZMQ_MAXMSGSIZE cuts frames above twice
that), at most ``max_keys`` keys and ``max_map_bytes`` bytes in the map, of which one network
address (the message's "Peer-Address") may hold ``max_keys_per_address`` keys and
``max_map_bytes_per_address`` bytes, ttls clamped to ``max_ttl_s``, and snapshot replies queued at
most ``kSnapshotHwm`` messages deep per peer (a reply its client does not read is dropped; one that
is read goes on until whole). It counts every refusal by kind (``REFUSAL_KINDS``: ``malformed``,
``oversized``, ``refused_quota``, ``refused_full``, ``ttl_clamped``, ``snapshots_dropped``,
``errors``) and publishes its own status under ``status/kvstore/server`` with those counters and
``snapshots``, ``expired``, ``keys`` and ``map_bytes`` as extra fields.

State schema (every value a msgpack map with ``version`` = ``SCHEMA_VERSION``; the codecs are the
C++ ones: ``NodeGroupRecord``, ``ServiceStatus``, ``AcquireRequest``, each with ``encode()`` and
``decode(bytes)``, which raises ``KvstoreError`` naming the field):

``nodegroups/<uid>`` (``nodegroup_key(uid)``) -> ``NodeGroupRecord``
    ``uid`` str, ``host`` str (where its PULL sockets listen), ``ports`` [int] (one per aggregator
    thread: thread r pushes to ``ports[r]``, see ``endpoint(r)``), ``node`` str (compute node),
    ``rank`` int (MPI rank), ``status`` str. Set by each NodeGroup with a ttl it refreshes; a dead
    NodeGroup disappears after its ttl. Producers route frame f to the (f mod n)-th of the sorted
    UIDs (``client.nodegroups()`` returns them sorted, as ``nodegroups_from(entries).records`` does).
``status/<service>/<name>`` (``status_key(service, name)``) -> ``ServiceStatus``
    ``state`` str (idle, registering, streaming, draining, writing, writing-to-disk, finished,
    error, serving: ``STATE_*``), ``scan`` int (current or last scan, 0 before the first),
    ``messages`` int, ``bytes`` int, ``updated_s`` float (Unix time), plus free ``extra`` fields
    (bool, int, float or str). Services: ``producer`` (name ``r<receiver>t<thread>``),
    ``aggregator`` (``t<thread>``), ``nodegroup`` (the uid), ``kvstore`` (``server``).
``acquire/request`` (``ACQUIRE_REQUEST_KEY``) -> ``AcquireRequest``
    ``scan_number`` int, ``scan_x`` int, ``scan_y`` int, ``rate_hz`` float (0: as fast as possible),
    ``routing`` [str] (optional: the sorted NodeGroup UIDs, fixed by ``sectorflow acquire`` from
    its replica so every producer thread routes alike; ``[]`` = fallback to raw files; absent or
    ``None`` = each producer thread reads ``nodegroups/`` from its own replica), ``source`` str
    (optional: ``SOURCE_SIMULATOR`` "simulator", the default, or ``SOURCE_REPLAY`` "replay": stream
    the scan's raw files from ``producer.fallback_dir``). ``encode()`` writes ``routing`` only when
    set and ``source`` only for replay, so a request of the first five fields keeps its bytes.

Records are bounded (``MAX_*``: uid, name and text bytes, ports, extra fields, routing length, scan
side); decoders refuse what passes a bound and encoders refuse to write it. Readers of a list never
fail on one bad entry: ``nodegroups_from`` returns ``.records`` and ``.rejected`` ({key: why}), and
``Client.nodegroups()`` / ``Client.statuses()`` skip what does not decode, log each bad key once
and count it in ``Client.bad_records`` (``BadEntries`` remembers what was reported).

Client semantics: ``set(key, value_bytes, ttl_s)`` makes the key this client's own (refreshed every
ttl/3 while it lives, republished after a server restart, deleted when the client closes);
``set_once`` writes without owning; ``get``/``subtree`` read the local replica and never touch
the network; ``on_change(prefix, callback)`` calls ``callback(key, value_or_None)`` on the agent
thread. A replica reconnects and resyncs by snapshot when the server is silent for
``silence_heartbeats`` heartbeats, restarts or a gap appears in the sequence.
"""

from sectorflow._core.kvstore import (
    HEARTBEAT,
    KVMSG_FRAMES,
    MAX_KEY_BYTES,
    MAX_PROPERTIES_BYTES,
    REFUSAL_KINDS,
    SEQUENCE_BYTES,
    SNAPSHOT_END,
    SNAPSHOT_REQUEST,
    TTL_CEILING_S,
    TTL_PROPERTY,
    UUID_BYTES,
    ClientOptions,
    ClientState,
    ClientStats,
    KvMsg,
    KvstoreError,
    Server,
    ServerOptions,
    ServerStats,
    check_key,
    check_msgpack,
    decode_kvmsg,
    decode_properties,
    decode_sequence,
    encode_kvmsg,
    encode_properties,
    encode_sequence,
    new_uuid,
)

from .client import Client
from .options import client_options, server_options

__all__ = [
    "HEARTBEAT",
    "KVMSG_FRAMES",
    "MAX_KEY_BYTES",
    "MAX_PROPERTIES_BYTES",
    "REFUSAL_KINDS",
    "SEQUENCE_BYTES",
    "SNAPSHOT_END",
    "SNAPSHOT_REQUEST",
    "TTL_CEILING_S",
    "TTL_PROPERTY",
    "UUID_BYTES",
    "Client",
    "ClientOptions",
    "ClientState",
    "ClientStats",
    "KvMsg",
    "KvstoreError",
    "Server",
    "ServerOptions",
    "ServerStats",
    "check_key",
    "check_msgpack",
    "client_options",
    "decode_kvmsg",
    "decode_properties",
    "decode_sequence",
    "encode_kvmsg",
    "encode_properties",
    "encode_sequence",
    "new_uuid",
    "server_options",
]
