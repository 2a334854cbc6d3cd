"""The kvstore: sectorflow's shared state, the Clone pattern of the ZeroMQ Guide (chapter 5).

One server (``sectorflow kvstore --config F``) holds a key-value map and a sequence number; every
service keeps a live replica through a ``Client`` and publishes its own keys through the server.
The server and the client are C++ (``sectorflow::kvstore``, the same code C++ programs link); this
package re-exports them with a thin Pythonic layer (msgpack values, ``from_config``, readers of the
record lists that skip bad entries). The wire (CHP), the keys, the records and the bounds are
specified in ``kvstore/SPEC.md``; the record codecs (``NodeGroupRecord``, ``ServiceStatus``,
``AcquireRequest``, ``nodegroups_from``) are wire contracts in ``sectorflow.protocol``.

Client semantics: ``set(key, value_bytes, ttl_s)`` makes the key this client's own (refreshed every
ttl/3 while it lives, republished after a server restart, deleted when the client closes);
``set_once`` writes without owning; ``get``/``subtree`` read the local replica and never touch the
network; ``on_change(prefix, callback)`` calls ``callback(key, value_or_None)`` on the agent
thread. Every snapshot names the server's stack (``Client.stack_id``): a client warns when it finds
another stack than the last one, and every status it writes says its stack (``STACK_ID_FIELD``,
``STACK_CHANGED_FIELD``). With a pair of servers (``[kvstore] servers``) a client moves to the other
one when its server falls silent, and each status says which one it synced with last (``SERVER_FIELD``).
The server counts every refusal by kind (``REFUSAL_KINDS``) and publishes them in
``status/kvstore/server``.
"""

from sectorflow._core.kvstore import (
    HEARTBEAT,
    KVMSG_FRAMES,
    MAX_KEY_BYTES,
    MAX_PROPERTIES_BYTES,
    REFUSAL_KINDS,
    SEQUENCE_BYTES,
    SERVER_FIELD,
    STACK_CHANGED_FIELD,
    STACK_ID_FIELD,
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
    is_stack_id,
    new_stack_id,
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
    "SERVER_FIELD",
    "STACK_CHANGED_FIELD",
    "STACK_ID_FIELD",
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
    "is_stack_id",
    "new_stack_id",
    "new_uuid",
    "server_options",
]
