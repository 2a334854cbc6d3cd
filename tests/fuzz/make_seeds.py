"""Writes the seed corpora corpus/<target>/ of the fuzz targets from the golden messages of
tests/data (stdlib only: `python3 tests/fuzz/make_seeds.py`). The seeds are committed; run this
again when a golden file changes. libFuzzer starts from them and keeps what it finds in
build-fuzz/corpus/, never here.
"""

import pathlib
import shutil
import struct

HERE = pathlib.Path(__file__).resolve().parent
DATA = HERE.parent / "data"
CORPUS = HERE / "corpus"

# target -> golden files used as they are
COPIED = {
    "fuzz_data_header": ["data_header_v2.bin", "data_header_v3.bin"],
    "fuzz_native_header": ["native_header.bin"],
    "fuzz_info_message": ["info_v1.bin", "info_v1_run.bin"],
    "fuzz_kvmsg": ["kvmsg_kvpub.frames", "kvmsg_kthxbai.frames"],
    "fuzz_kvstore_log": ["kvstore_log_v1.log"],
    "fuzz_nodegroup_record": ["nodegroup_record_v1.msgpack", "nodegroup_record_v1_stack.msgpack"],
    "fuzz_service_status": ["service_status_v1.msgpack"],
    "fuzz_acquire_request": ["acquire_request_v1.msgpack", "acquire_request_v1_routing.msgpack"],
    "fuzz_scan_request": ["scan_request_v1.msgpack"],
    "fuzz_scan_producer": ["scan_producer_v1.msgpack"],
    "fuzz_scan_relay": ["scan_relay_v1.msgpack", "scan_relay_v1_run.msgpack"],
    "fuzz_scan_nodegroup": ["scan_nodegroup_v1.msgpack", "scan_nodegroup_v1_runs.msgpack"],
    "fuzz_scan_file": ["scan_file_v1.msgpack"],
}


def frames(*parts: bytes) -> bytes:
    """The framing of tests/fuzz/frames.hpp and tests/data/*.frames."""
    return b"".join(struct.pack(">I", len(part)) + part for part in parts)


def raw_record(scan: int, frame: int, scan_x: int, scan_y: int, x: int, y: int, fill: int) -> bytes:
    """A record of fuzz_raw_file's geometry: the 16-byte header of protocol/raw_file.hpp, 16 bytes of pixels."""
    return struct.pack("<IIHHHH", scan, frame, scan_x, scan_y, x, y) + bytes([fill]) * 16


def write(target: str, name: str, content: bytes) -> None:
    (CORPUS / target).mkdir(parents=True, exist_ok=True)
    (CORPUS / target / name).write_bytes(content)


def main() -> None:
    shutil.rmtree(CORPUS, ignore_errors=True)
    for target, names in COPIED.items():
        for name in names:
            write(target, name, (DATA / name).read_bytes())
    record = (DATA / "nodegroup_record_v1.msgpack").read_bytes()
    write("fuzz_nodegroups_from", "one_nodegroup.frames", frames(b"nodegroups/ng-0001", record))
    # fuzz_raw_file reads its input as data_scan0000000007_module1_0.data (scan 7).
    write("fuzz_raw_file", "two_records.data", raw_record(7, 0, 2, 1, 0, 0, 0x11) + raw_record(7, 1, 2, 1, 1, 0, 0x22))
    write("fuzz_raw_file_name", "module1_thread0.name", b"data_scan0000000007_module1_0.data")


if __name__ == "__main__":
    main()
