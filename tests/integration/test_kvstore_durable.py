"""The kvstore's durable records (kvstore/SPEC.md, "Durable records"): a real `sectorflow kvstore`
process with a log_dir, SIGKILLed and restarted, its files cut and damaged as a crash or a bad disk
would leave them.

The records are written with ``set_once`` (no owner): no client writes them again after the
restart, so whatever the new server holds it loaded from its files.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace

import msgpack
import pytest
from kvstore_support import SYNC_S, KvServer, clients, server_status, start_kvstore  # noqa: F401 (fixtures)
from support import Processes, sectorflow_command, wait_until
from support import small_disk as tmpfs

from sectorflow.kvstore import Client, client_options

# The ttl of the record that must be back after the restart and expire at its time: long enough for
# a kill and a restart on a loaded machine (the test waits for it to expire).
TTL_S = 15.0


def packed(value: object) -> bytes:
    return msgpack.packb(value)


def durable_kvstore(make_config: Callable, processes: Processes, log_dir: Path, **kvstore: object) -> KvServer:
    return start_kvstore(make_config, processes, kvstore={"log_dir": str(log_dir), **kvstore})


def kill_and_restart(server: KvServer) -> None:
    os.killpg(server.process.pid, signal.SIGKILL)  # a crash: nothing flushed, nothing said
    server.process.wait()
    server.start()


def write_and_see(writer: Client, observer: Client, values: dict[str, bytes], ttl_s: float = 0.0) -> None:
    """Write each key once (no owner) and wait until the server has published it."""
    for key, value in values.items():
        writer.set_once(key, value, ttl_s)
    wait_until(lambda: all(observer.get(key) == value for key, value in values.items()), SYNC_S,
               f"the server to publish {len(values)} records")


def test_every_record_survives_a_sigkilled_server_and_a_ttl_record_still_expires_at_its_time(
    make_config: Callable, processes: Processes, clients: Callable[..., Client], tmp_path: Path  # noqa: F811
) -> None:
    server = durable_kvstore(make_config, processes, tmp_path / "kvlog", log_fsync="never")
    writer, observer = clients(server.config), clients(server.config)
    lines: list[str] = []
    watcher = Client(client_options(server.config, log=lines.append))
    try:
        values = {f"scans/{scan:010d}/file": packed({"scan": scan}) for scan in range(1, 31)}
        values["acquire/request"] = packed({"scan": 30})
        write_and_see(writer, observer, values)
        written_s = time.time()
        write_and_see(writer, observer, {"durable/ttl": packed("short")}, ttl_s=TTL_S)
        writer.erase("scans/0000000001/file")  # a deletion is a record too
        wait_until(lambda: observer.get("scans/0000000001/file") is None, SYNC_S, "the deletion")
        wait_until(lambda: watcher.synced() and watcher.get("durable/ttl") is not None, SYNC_S, "the watcher's replica")
        sequence_before = watcher.sequence()

        kill_and_restart(server)
        assert "loaded" in server.log() and "sequence continues above" in server.log(), server.log()

        fresh = clients(server.config)
        assert fresh.wait_synced(SYNC_S)
        del values["scans/0000000001/file"]
        assert {key: fresh.get(key) for key in values} == values
        assert fresh.get("scans/0000000001/file") is None
        assert fresh.get("durable/ttl") == packed("short"), "the ttl record is back while its time lasts"
        status = server_status(fresh)
        assert status is not None and status.extra["log"] == "on" and status.extra["log_tails_cut"] == 0
        assert status.extra["log_records_loaded"] >= len(values) + 2
        # Clients never see the sequence go back: the new server continues above what they saw.
        assert fresh.sequence() > sequence_before
        wait_until(lambda: watcher.synced() and watcher.sequence() > sequence_before, SYNC_S,
                   "the watcher to follow the restarted server")
        assert not [line for line in lines if "went back" in line], lines

        wait_until(lambda: fresh.get("durable/ttl") is None, written_s + TTL_S + SYNC_S - time.time(),
                   "the ttl record to expire with nobody refreshing it")
        assert time.time() >= written_s + TTL_S, "the ttl record expired before its time"
        wait_until(lambda: server_status(fresh).extra["expired"] >= 1, SYNC_S, "the server to count the expiry")
    finally:
        watcher.close()


def test_compaction_under_many_updates_keeps_the_live_map_and_bounds_the_files(
    make_config: Callable, processes: Processes, clients: Callable[..., Client], tmp_path: Path  # noqa: F811
) -> None:
    log_dir = tmp_path / "kvlog"
    max_bytes = 64 << 10
    server = durable_kvstore(make_config, processes, log_dir, log_max_bytes=max_bytes, log_fsync="interval",
                             log_fsync_interval_ms=50)
    writer, observer = clients(server.config), clients(server.config)
    keys = [f"scans/0000000007/producer/r{r}t0" for r in range(40)]
    final: dict[str, bytes] = {}
    for round_ in range(60):  # 2,400 updates of about 300 bytes: about ten times the log's bound
        for i, key in enumerate(keys):
            final[key] = packed({"round": round_, "pad": "x" * 250, "i": i})
            writer.set_once(key, final[key])
    for key in keys[:10]:
        writer.erase(key)
        del final[key]
    wait_until(lambda: all(observer.get(key) == value for key, value in final.items())
               and all(observer.get(key) is None for key in keys[:10]), 3 * SYNC_S, "the last round")
    wait_until(lambda: (server_status(observer) or server_status(writer)).extra.get("log_compactions", 0) >= 3,
               SYNC_S, "compactions")
    files = {path.name: path.stat().st_size for path in log_dir.iterdir()}
    assert files["kvstore.log"] <= max_bytes + 4096, files  # the bound, passed by at most the record that passed it
    assert files["kvstore.snapshot"] <= 40 * 600, files  # the live map: 30 keys, not 2,400 updates

    kill_and_restart(server)
    fresh = clients(server.config)
    assert fresh.wait_synced(SYNC_S)
    assert {key: fresh.get(key) for key in final} == final
    assert all(fresh.get(key) is None for key in keys[:10])


def record_offset(log: Path, key: str) -> int:
    """Where the record of ``key`` (written once) lies in the log: its key's bytes."""
    content = log.read_bytes()
    at = content.find(key.encode())
    assert at > 0 and content.find(key.encode(), at + 1) < 0, f"{key} once in {log}"
    return at


@pytest.mark.parametrize("damage", ["truncated mid-record", "one byte flipped"])
def test_a_damaged_log_is_cut_at_its_last_whole_record_and_the_server_serves(
    damage: str, make_config: Callable, processes: Processes, clients: Callable[..., Client],  # noqa: F811
    tmp_path: Path,
) -> None:
    log_dir = tmp_path / "kvlog"
    server = durable_kvstore(make_config, processes, log_dir, log_fsync="always")
    writer, observer = clients(server.config), clients(server.config)
    keys = [f"durable/k{i}" for i in range(10)]
    for i, key in enumerate(keys):  # one at a time: their records lie in this order in the log
        write_and_see(writer, observer, {key: packed(i)})
    os.killpg(server.process.pid, signal.SIGKILL)
    server.process.wait()

    log = log_dir / "kvstore.log"
    if damage == "truncated mid-record":
        damaged = 9
        os.truncate(log, record_offset(log, keys[9]) + 3)  # whatever followed k9 goes too
    else:
        damaged = 5
        content = bytearray(log.read_bytes())
        content[record_offset(log, keys[5]) + len(keys[5]) + 6] ^= 0x01  # inside k5's record
        log.write_bytes(bytes(content))
    server.start()

    assert "log tail cut at start" in server.log() and "kvstore.log" in server.log(), server.log()
    fresh = clients(server.config)
    assert fresh.wait_synced(SYNC_S)
    assert [key for i, key in enumerate(keys) if fresh.get(key) == packed(i)] == keys[:damaged]
    assert all(fresh.get(key) is None for key in keys[damaged:])
    status = server_status(fresh)
    assert status is not None and status.extra["log_tails_cut"] == 1 and status.extra["log_bytes_cut"] > 0
    assert (log_dir / "kvstore.log.cut").exists(), "the damaged file is kept for a look"
    # It serves: a new record is taken, logged, and survives the next restart.
    write_and_see(writer, observer, {"durable/after": packed("after")})
    kill_and_restart(server)
    again = clients(server.config)
    assert again.wait_synced(SYNC_S)
    wait_until(lambda: again.get("durable/after") == packed("after"), SYNC_S, "the record written after the cut")
    assert server_status(again).extra["log_tails_cut"] == 0


def test_a_log_dir_that_cannot_be_used_stops_the_server_at_start_with_one_line(
    make_config: Callable, tmp_path: Path
) -> None:
    in_the_way = tmp_path / "a-file"
    in_the_way.write_text("not a directory")
    _, path = make_config(kvstore={"log_dir": str(in_the_way)})
    result = sectorflow_command("kvstore", "--config", str(path), timeout_s=60)
    assert result.returncode != 0
    errors = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(errors) == 1 and f"cannot use the directory '{in_the_way}'" in errors[0], result.stderr
    assert "[kvstore] log_dir" in errors[0] and "Traceback" not in result.stderr


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[SimpleNamespace]:
    """A 1 MiB tmpfs, with a way to fill it up and to free it."""
    with tmpfs(tmp_path / "disk", "1m") as disk:
        yield disk


def test_a_full_disk_is_counted_the_server_serves_from_memory_and_its_log_resumes_when_there_is_room(
    make_config: Callable, processes: Processes, clients: Callable[..., Client], small_disk: SimpleNamespace  # noqa: F811
) -> None:
    server = durable_kvstore(make_config, processes, small_disk.path / "kvlog", log_fsync="never")
    writer, observer = clients(server.config), clients(server.config)
    small_disk.fill()
    values = {f"durable/full/{i:03d}": packed(f"{i:03d}" + "x" * 400) for i in range(100)}
    write_and_see(writer, observer, values)  # taken and published while no record reaches the disk

    def status_field(name: str) -> object:
        status = server_status(observer)
        return None if status is None else status.extra.get(name)

    wait_until(lambda: status_field("log") == "failing: serving from memory", SYNC_S, "the server to say so")
    assert status_field("log_write_errors") >= 1 and "No space left on device" in str(status_field("log_error"))
    wait_until(lambda: "write(s) of the durable records failed" in server.log(), SYNC_S, "the warning line")

    small_disk.free()
    wait_until(lambda: status_field("log") == "on", SYNC_S, "a compaction to resume the log")
    wait_until(lambda: "durable records resumed" in server.log(), SYNC_S, "the line saying so")
    kill_and_restart(server)
    fresh = clients(server.config)
    assert fresh.wait_synced(SYNC_S)
    assert {key: fresh.get(key) for key in values} == values, "the records taken while the disk was full"
