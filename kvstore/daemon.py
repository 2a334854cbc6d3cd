"""The kvstore server as a daemon: serve until SIGTERM or SIGINT, log what it did.

The C++ server loop runs in a worker thread with the GIL released; the main thread waits for a
signal (Python runs signal handlers only there), reports what the server refused as it is counted
(one line per kind and report interval, never one per message) and stops the server. States (the
one state machine, sectorflow.service), logged on every transition and published as the state of
the server's own status: starting, idle (serving), stopping, stopped.
"""

from __future__ import annotations

import logging
import threading

from sectorflow._core.kvstore import REFUSAL_KINDS, STACK_ID_FILE, KvstoreError, Server
from sectorflow.configs import Config
from sectorflow.errors import SectorflowError
from sectorflow.protocol import STATE_IDLE, STATE_STOPPED, STATE_STOPPING
from sectorflow.service import ServiceState, stop_on_signals

from .options import server_options

logger = logging.getLogger(__name__)

# How often the main thread looks at the server's counters (seconds).
REPORT_INTERVAL_S = 1.0

# How the log says what each refusal counter counts (server.hpp, "Bounds").
REFUSALS = {
    "oversized": "refused {new} value(s) above max_value_bytes",
    "refused_quota": "refused {new} write(s) from an address over its quota",
    "refused_full": "refused {new} write(s) to a full map",
    "ttl_clamped": "clamped {new} ttl(s) to max_ttl_s",
    "snapshots_dropped": "dropped {new} snapshot(s) a client did not read",
    "errors": "{new} message(s) threw in the server loop, which went on",
    "unauthenticated": "refused {new} CURVE handshake(s) of key(s) in no allowlist",
    "unauthorised": "refused {new} write(s) of key(s) the writer's role may not write",
    "refused_fold": "refused {new} write(s) of a scan's summary, which only the server folds",
}


def run_server(config: Config, pair: str = "") -> int:
    """Run the kvstore server of ``config`` until SIGTERM or SIGINT; returns the exit code 0.

    ``pair``: "primary" or "backup" of the pair ``[kvstore] servers`` lists; "" a single server,
    which a configuration listing a pair does not run (one line says to choose).

    Raises:
        SectorflowError: a port cannot be bound (the message names the address) or the server
            loop failed.
    """
    if not pair and len(config.kvstore.servers) == 2:
        raise SectorflowError(
            f"{config.source}: [kvstore] servers lists a pair ({', '.join(config.kvstore.servers)}): run each "
            "server with --pair primary or --pair backup")
    options = server_options(config, pair)
    try:
        server = Server(options)
    except KvstoreError as error:
        # The message names the address (ports: [kvstore] port) or the log directory ([kvstore] log_dir).
        raise SectorflowError(f"{error}; in {config.source}") from None
    _report_log_load(server)
    state = ServiceState(logger, publish=server.set_state)

    failures: list[BaseException] = []
    stop = threading.Event()  # set by a signal (below) or by the server loop ending

    def serve() -> None:
        try:
            server.run()
        except BaseException as error:  # reported by the main thread, once
            failures.append(error)
        finally:
            stop.set()

    worker = threading.Thread(target=serve, name="kvstore-server")
    try:
        with stop_on_signals(logger, on_stop=stop.set):
            worker.start()
            state.enter(STATE_IDLE)
            logger.info(
                "snapshots on %s, updates published on %s, updates collected on %s, heartbeat %d ms",
                server.endpoint(0), server.endpoint(1), server.endpoint(2), options.heartbeat_ms,
            )
            if pair:
                logger.info("pair: the %s, peer link on %s, peer at %s:%d", pair, server.endpoint(3),
                            options.peer_host, options.peer_port)
            reported: dict[str, int] = {}
            while not stop.wait(REPORT_INTERVAL_S):
                _report_refusals(server, reported)
            _report_refusals(server, reported)
            state.enter(STATE_STOPPING)
    finally:
        server.stop()
        if worker.is_alive():
            worker.join()
    stats = server.stats()
    state.enter(STATE_STOPPED)
    logger.info(
        "served %d updates, %d snapshots, %d expirations; rejected %d malformed messages; %d keys at sequence %d; %s",
        stats.updates, stats.snapshots, stats.expired, stats.malformed, stats.keys, stats.sequence,
        ", ".join(f"{kind} {stats.refusals(kind)}" for kind in REFUSAL_KINDS if kind != "malformed"),
    )
    if pair:
        logger.info(
            "pair: ended %s (peer %s); %d failover(s), %d split(s), %d update(s) mirrored, %d snapshot request(s) "
            "refused; pending writes: %d applied, %d lost past the bound, %d the active never published",
            stats.pair_state, stats.peer_state or "unheard", stats.failovers, stats.splits, stats.mirrored,
            stats.snapshots_refused, stats.pending_applied, stats.pending_lost, stats.pending_unmatched)
    if failures:
        raise SectorflowError(f"kvstore server on {server.endpoint(0)} failed: {failures[0]}")
    return 0


def _report_log_load(server: Server) -> None:
    """Log what the server loaded from its durable records at start, and every tail it cut."""
    options, stats = server.options, server.stats()
    if not options.log_dir:
        logger.info("stack %s, new: no durable records ([kvstore] log_dir is empty), so a restart starts a new, "
                    "empty stack", server.stack_id)
        return
    logger.info("stack %s, kept in %s/%s: a restart with this log_dir is the same stack", server.stack_id,
                options.log_dir, STACK_ID_FILE)
    logger.info("durable records in %s (fsync %s): loaded %d records, sequence continues above %d",
                options.log_dir, options.log_fsync, stats.log_records_loaded, stats.sequence)
    for line in stats.log_cuts:
        logger.warning("log tail cut at start (counted in log_tails_cut): %s", line)


def _report_refusals(server: Server, reported: dict[str, int]) -> None:
    """Log what the server refused since the last report, one line per kind; updates ``reported``."""
    for line in server.take_security_refusals():
        logger.warning("%s", line)
    for line in server.take_pair_events():
        logger.info("%s", line)
    stats = server.stats()
    new_errors = stats.log_write_errors - reported.get("log_write_errors", 0)
    if new_errors > 0:
        reported["log_write_errors"] = stats.log_write_errors
        logger.warning("%d write(s) of the durable records failed, %d in all (%s); last: %s", new_errors,
                       stats.log_write_errors, "serving from memory, retrying at every heartbeat" if stats.log_failing
                       else "the log resumed with a new snapshot", stats.log_error)
    if reported.get("log_failing", 0) and not stats.log_failing:
        logger.info("durable records resumed: a new snapshot holds the whole map")
    reported["log_failing"] = int(stats.log_failing)
    for kind in REFUSAL_KINDS:
        count = stats.refusals(kind)
        new = count - reported.get(kind, 0)
        if new <= 0:
            continue
        reported[kind] = count
        if kind == "malformed":
            logger.warning("rejected %d malformed message(s), %d in all; last: %s", new, count, stats.last_malformed)
        else:
            logger.warning("%s, %d in all; first: %s", REFUSALS[kind].format(new=new), count,
                           stats.first_refusals.get(kind, ""))
