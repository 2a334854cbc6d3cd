"""The configuration schema: frozen dataclasses, one per TOML table, a docstring per field.

Field metadata drives validation in ``loader.py``: ``doc`` (shown in errors and the README's
reference), ``min``/``max`` for numbers, ``choices`` for strings. Units are in the names.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any


def setting(default: Any = None, doc: str = "", *, required: bool = False, **rules: Any) -> Any:
    """A dataclass field carrying its documentation and validation rules."""
    metadata = {"doc": doc, **rules}
    if required:
        return field(metadata=metadata)
    if isinstance(default, (dict, list, tuple)):
        return field(default_factory=lambda: type(default)(default), metadata=metadata)
    return field(default=default, metadata=metadata)


PORT = {"min": 1, "max": 65535}


@dataclass(frozen=True)
class DetectorConfig:
    """Detector geometry: the frame is tiled row-major by sectors; receiver r reads sector r."""

    frame_rows: int = setting(576, "pixel rows of a whole frame", min=1)
    frame_cols: int = setting(576, "pixel columns of a whole frame", min=1)
    sector_rows: int = setting(144, "pixel rows of one sector", min=1)
    sector_cols: int = setting(576, "pixel columns of one sector", min=1)
    dtype: str = setting("uint16", "pixel type", choices=("uint8", "uint16", "uint32"))

    @property
    def n_sectors(self) -> int:
        return (self.frame_rows // self.sector_rows) * (self.frame_cols // self.sector_cols)

    @property
    def itemsize(self) -> int:
        return {"uint8": 1, "uint16": 2, "uint32": 4}[self.dtype]

    @property
    def sector_bytes(self) -> int:
        return self.sector_rows * self.sector_cols * self.itemsize


@dataclass(frozen=True)
class ReceiverConfig:
    """One detector receiver server; its producer daemon streams sector `index` of every frame."""

    host: str = setting("127.0.0.1", "address of the receiver server (where its producer runs)")
    threads: int = setting(1, "producer threads on this receiver; thread t sends the probe positions p with "
                          "p % threads == t, in order (NodeGroups rely on it to tell a lost sector from a late one)",
                          min=1, max=64)
    wire: str = setting(
        "sectorflow", "the dialect this receiver streams to its aggregator thread: 'sectorflow' (SFSP: an info "
        "message per thread, then data) or 'native' (the 4D Camera receivers' own header: no info message, each "
        "header says how many frames its thread sends; protocol/SPEC.md, \"Two dialects\")",
        choices=("sectorflow", "native"))


@dataclass(frozen=True)
class KvstoreConfig:
    """The Clone-pattern state server: snapshot on port, publisher on port+1, updates on port+2."""

    host: str = setting("127.0.0.1", "address clients connect to")
    servers: tuple[str, ...] = setting(
        (), "the kvstore pair clients use, as \"host:port\" (port: each server's P), primary first: a client syncs "
        "with one and moves to the other when it falls silent, and sends every write to both (kvstore/SPEC.md, 'The "
        "pair'); at most 2 (Binary Star is a pair). Empty: the one server at host and port. Two: each server runs "
        "with 'sectorflow kvstore --pair primary' or '--pair backup', takes its port from its entry and its peer from "
        "the other (which also uses P + 3, the peer link), and keeps its durable records in log_dir/<pair>")
    bind_host: str = setting("127.0.0.1", "interface the server binds (0.0.0.0 for all)")
    port: int = setting(5556, "snapshot port P; the server also uses P+1 and P+2", min=1, max=65533)
    heartbeat_ms: int = setting(1000, "HUGZ interval of the server", min=10, max=60000)
    silence_heartbeats: int = setting(3, "missed heartbeats after which a client reconnects", min=2, max=100)
    ttl_s: float = setting(5.0, "time-to-live of a service's registration; refreshed while it lives", min=0.1)
    max_value_bytes: int = setting(
        65536, "largest value (msgpack body) the server accepts and a client sends; a larger one is refused and "
        "counted (oversized). Every kvstore socket cuts frames above twice this (ZMQ_MAXMSGSIZE), disconnecting "
        "the sender. The acquire request's routing list is the largest value: about 30 bytes per NodeGroup",
        min=1024, max=64 << 20)
    max_keys: int = setting(
        100_000, "keys the server's map holds at most (its own status aside); a new key beyond is refused and "
        "counted (refused_full). A whole stack needs a few per producer thread, aggregator thread and NodeGroup",
        min=16, max=10_000_000)
    max_map_bytes: int = setting(
        256 << 20, "bytes of keys, properties and values the server's map holds at most; a write beyond is refused "
        "(refused_full). With max_keys, what bounds the server's memory", min=1 << 20, max=64 << 30)
    max_keys_per_address: int = setting(
        25_000, "keys last written from one network address (every service of a host shares its address: on "
        "127.0.0.1 one address holds a whole local stack); a write beyond is refused and counted (refused_quota)",
        min=1, max=10_000_000)
    max_map_bytes_per_address: int = setting(
        64 << 20, "bytes of the keys last written from one network address; a write beyond is refused "
        "(refused_quota)", min=1024, max=64 << 30)
    max_stack_keys: int = setting(
        120_000, "keys of the stack's own records (nodegroups/, status/, acquire/ and the scan records scans/<n>/...) "
        "the server holds, in a room of their own that no other key takes and no address or identity quota limits "
        "(other keys are charged to their writer: its identity with [security] on, else its address); when it is full "
        "the oldest scan's records are erased to make room (scans_evicted), never the scan being written. A 16 x 16 "
        "scan leaves about 12 keys while it runs and one (its summary, scans_kept) once it is over", min=16, max=10_000_000)
    max_stack_bytes: int = setting(
        128 << 20, "bytes of the stack's own records the server holds (max_stack_keys)", min=64 << 10, max=64 << 30)
    max_ttl_s: float = setting(
        86400.0, "longest ttl the server grants: a longer one is clamped and counted (ttl_clamped), and a client "
        "refuses to ask for one; at least ttl_s", min=1.0, max=1e9)
    scan_record_ttl_s: float = setting(
        86400.0, "how long a scan's parts (scans/<n>/..., what became of every sector) stay in the kvstore "
        "after they were written, unless the scan is folded first into its summary (scans_kept); at most max_ttl_s",
        min=1.0, max=1e9)
    scans_kept: int = setting(
        10_000, "finished scans whose summary (scans/<n>/summary: the scan's account in one record, which replaced "
        "its parts when the scan was over) the server keeps, with no ttl; past it the oldest scan's summary is erased "
        "first (summaries_dropped). Scans not folded (running, or never finished) are not erased by it",
        min=1, max=10_000_000)
    log_dir: str = setting(
        "", "directory of the server's durable records (kvstore/SPEC.md, 'Durable records'): every update it "
        "publishes is appended to a log there, and a restarted server loads them and keeps its stack id (file "
        "stack_id: the same stack); '' keeps the map in memory only, and every start is a new stack. "
        "One directory per server (a second server refuses a directory in use)")
    log_fsync: str = setting(
        "interval", "when the log is forced to disk: every record ('always'), at most every log_fsync_interval_ms "
        "('interval') or by the kernel ('never'); a record is written before its update is published in every "
        "policy, so a killed server loses nothing, and the policy decides what a crash of the machine may take",
        choices=("always", "interval", "never"))
    log_fsync_interval_ms: int = setting(1000, "the longest time an appended record waits for its fsync with "
                                         "log_fsync = 'interval'", min=1, max=3_600_000)
    log_max_bytes: int = setting(
        64 << 20, "bytes the log may reach before it is compacted: the live map written as a new snapshot and a "
        "new log begun, so the directory holds at most the map's records plus this", min=64 << 10, max=64 << 30)

    @property
    def addresses(self) -> tuple[str, ...]:
        """The "host:port" of each server clients use: the pair's, or the one at host and port."""
        return self.servers or (f"{self.host}:{self.port}",)

    @property
    def address(self) -> str:
        """The servers clients use, for messages: "host:port", or the pair's "A or B"."""
        return " or ".join(self.addresses)


# The aggregator's lease (aggregator/lease.py): renewals per takeover_s, and the part of takeover_s
# after which a holder that saw none of its renewals come back stops relaying. The rest of the
# period is the stopped holder's time to free its ports before the server can expire the lease.
LEASE_RENEWALS_PER_PERIOD = 8
LEASE_FENCE_FRACTION = 0.75


def min_takeover_s(heartbeat_ms: int, silence_heartbeats: int) -> float:
    """The shortest ``takeover_s`` with which a kvstore failover never stops the active aggregator.

    Its client finds the new active within ``silence_heartbeats`` heartbeats of the old one's last
    word, and two more bring the vote, the snapshot and the held renewals applied (kvstore/SPEC.md,
    "The pair"); a renewal may have been on its way for one renewal period before that. All of it
    must pass before the holder fences itself.
    """
    failover_s = (silence_heartbeats + 2) * heartbeat_ms / 1000
    return failover_s / (LEASE_FENCE_FRACTION - 1 / LEASE_RENEWALS_PER_PERIOD)


@dataclass(frozen=True)
class AggregatorConfig:
    """The relay: thread r pulls from receiver r's producers on base_port + r."""

    host: str = setting("127.0.0.1", "address producers connect to")
    tier: tuple[str, ...] = setting(
        (), "the aggregation tier, one address per member: frame f goes through member f % len(tier), so each "
        "carries about 1/len(tier) of the bytes (protocol/SPEC.md, 'The aggregation tier'); member i's relay "
        "thread r listens on base_port + i x receivers + r, and runs as 'sectorflow aggregator --member i'. "
        "Empty: one aggregator at host")
    bind_host: str = setting("127.0.0.1", "interface the aggregator binds")
    base_port: int = setting(6100, "port of aggregator thread 0; thread r listens on base_port + r (a tier's "
                             "member i on base_port + i x receivers + r)", **PORT)
    hwm: int = setting(
        50, "ZeroMQ high-water mark (messages) of every aggregator socket; what it queues is memory and widens the "
        "frame-order spread a NodeGroup's pool must hold", min=1)
    sndbuf_bytes: int = setting(
        0, "kernel send buffer (ZMQ_SNDBUF) of each socket to a NodeGroup, the WAN hop: at least the link's "
        "bandwidth-delay product per stream for a long fat link (docs/deployment.md, 'Long fat links'); capped by the "
        "host's net.core.wmem_max; 0 leaves the kernel's autotuning (net.ipv4.tcp_wmem) in charge", min=0,
        max=2_147_483_647)
    send_timeout_ms: int = setting(
        5000, "backpressure policy of the relay: a send to a NodeGroup that stays blocked this long (connected but "
        "not reading) declares it dead for that scan; its messages of the scan are then dropped and counted lost "
        "without waiting, the relay record names it, and its producers write its sectors to raw files; a dead "
        "NodeGroup stalls a relay thread at most this long once per scan", min=1, max=3_600_000)
    native_scan_idle_s: float = setting(
        10.0, "a scan of a native receiver (wire = 'native': no info message announces its end) is over at its "
        "relay thread when every thread sent what its headers announced, or after this long without a message "
        "of it; the NodeGroups then get the count of what was forwarded. A scan number seen again after that "
        "begins a new run (a replay)", min=0.1, max=86400.0)
    native_scans_requested: bool = setting(
        True, "every scan of a native receiver is requested by 'sectorflow acquire' (sectorflow's producer daemons "
        "drive it): native data of a scan with no request record (scans/<n>/request) is a stray (a stray message, "
        "a receiver restarted with an old scan), refused (no_info) and counted, and never opens a run. false: the "
        "receivers' own software starts scans unannounced, and a scan's first message opens it (the aggregator "
        "fixes its routing and writes its request record), so a stray message also opens a run")
    standby_host: str = setting(
        "", "address of a standby aggregator ('' for none, one aggregator): with it set, every aggregator of the "
        "stack takes the kvstore's lease status/aggregator/active before it binds, the others wait as standbys and "
        "one takes over when the lease is not renewed for takeover_s; producers connect to host and standby_host "
        "(ZMQ_IMMEDIATE: only the bound one gets messages). The same address as host: the standby binds the "
        "active's ports once they are free (one machine). Beside a tier, each member i holds its own lease "
        "status/aggregator/active-<i> and the one standby takes whichever is not renewed, relaying that member's "
        "slice on that member's ports (with [security] it holds every member's key pair)")
    takeover_s: float = setting(
        8.0, "with standby_host set, the lease period: the active aggregator renews status/aggregator/active every "
        "eighth of it and stops relaying when it has not seen a renewal of its own come back for three quarters of "
        "it; a standby takes over once the lease expired (not renewed for this long). At least "
        "(kvstore.silence_heartbeats + 2) x kvstore.heartbeat_ms / 0.625, so that a kvstore failover never stops the "
        "active aggregator (8 s with the default heartbeat)", min=0.3, max=600.0)


    @property
    def hosts(self) -> tuple[str, ...]:
        """Each tier member's address, member order: the tier's, or host alone."""
        return self.tier or (self.host,)


@dataclass(frozen=True)
class ProducerConfig:
    """Receiver-side streaming and the disk fallback."""

    send_hwm: int = setting(
        16, "high-water mark of the PUSH sockets; sends block beyond it. Kept small: a thread's queue that the "
        "aggregator drains more slowly than a sibling's lets the sibling's frames run ahead", min=1)
    max_lead_frames: int = setting(
        32, "how many frames a producer thread may run ahead of the slowest thread of its receiver (simulated "
        "and replayed scans; detector hardware paces its threads itself): a NodeGroup's pool must hold this "
        "spread; at least the receiver's thread count", min=1, max=1_000_000)
    send_timeout_ms: int = setting(
        10000, "how long a send to the aggregator may stay blocked at the high-water mark: beyond it the "
        "aggregator is taken as not taking the scan, and the thread writes every remaining sector of the scan "
        "to a raw file in fallback_dir (spilled, with a warning) instead of waiting", min=1, max=3_600_000)
    fallback_dir: str = setting(
        "out/raw", "where scans go as raw files when no NodeGroup is registered, and where a thread spills the "
        "sectors it cannot stream")


@dataclass(frozen=True)
class NodegroupConfig:
    """NodeGroups on compute nodes (one MPI rank per node, groups_per_rank groups per rank)."""

    host: str = setting("127.0.0.1", "address a NodeGroup binds and advertises (the node's address)")
    groups_per_rank: int = setting(1, "NodeGroups per MPI rank", min=1, max=64)
    counting_threads: int = setting(2, "counting threads per NodeGroup", min=1, max=256)
    recv_hwm: int = setting(16, "high-water mark of the NodeGroup's PULL sockets (messages held per receiver)", min=1)
    rcvbuf_bytes: int = setting(
        0, "kernel receive buffer (ZMQ_RCVBUF) of the NodeGroup's PULL sockets, the WAN hop's window: at least "
        "the bandwidth-delay product per stream (docs/deployment.md, 'Long fat links'); capped by the node's "
        "net.core.rmem_max; 0 leaves the kernel's autotuning (net.ipv4.tcp_rmem) in charge", min=0,
        max=2_147_483_647)
    pool_frames: int = setting(
        64, "frames a NodeGroup may hold in assembly at once, split over its counting threads (a frame holds its "
        "received sectors, not a copy: memory follows the sectors in flight, at most this many frames' worth; "
        "when full, sectors needing a new frame wait upstream; only when no frame can complete is one counted "
        "early as incomplete; size it for the frame-order spread of the producers)", min=1)
    scan_timeout_s: float = setting(
        60.0, "seconds without data from an aggregator thread after which its part of an unfinished scan is over "
        "(the scan is written with what arrived, marked timed out)", min=0.1)
    output_dir: str = setting("out/counted", "directory of the per-scan HDF5 files (checked writable at start-up: a "
                              "job that cannot write there registers no NodeGroup)")
    second_output_dir: str = setting(
        "", "where a scan's file goes when it cannot be written to output_dir (a full disk); '' for none")
    file_mode: str = setting(
        "", "permissions of the counted files, in octal (e.g. '0640': the group reads, others do not); '' follows "
        "the NodeGroups' umask, as every file and directory sectorflow makes (0644 under the usual 022)")
    file_group: str = setting(
        "", "group (name or number) the counted files are given, one the NodeGroups' user belongs to (checked at "
        "start-up); '' keeps the user's own")
    compression: str = setting(
        "none", "filter of the counted files' event datasets, one HDF5 has built in, so stempy and h5py read "
        "them with the shipped packages: 'none', or 'deflate' (gzip level 4 after the byte shuffle). stempy's "
        "/electron_events/frames keeps its events in HDF5's global heap, which no filter reaches; the NeXus "
        "event_id compresses: at 2,000 electrons per frame a file is about 32% smaller and rank 0 writes it 3 to 5 "
        "times more slowly (BENCHMARKS.md, counted_write)",
        choices=("none", "deflate"))
    gather_piece_events: int = setting(
        16_777_216, "events of one piece of a NodeGroup's part of a scan, sent to rank 0 as soon as its frames are "
        "counted, while the scan runs (the last piece, with the part's account, when it ends): rank 0 writes each "
        "piece into the scan's file as it comes, and a NodeGroup holds about a piece of a running scan, not its "
        "part (64 MiB of events at the default), whatever the scan's size", min=1)
    write_retry_s: float = setting(
        30.0, "how long rank 0 keeps retrying a scan's file that could not be written anywhere before its file "
        "record says failed (on stop: one last try)", min=0.0)
    liveness_ttl_s: float = setting(
        2.0, "time-to-live of a NodeGroup's registration, refreshed by its rank's service loop, not by the kvstore "
        "client's thread: a rank that dies or hangs loses its registrations after this, and the job's other ranks, "
        "which watch them, deregister theirs at once and the job exits non-zero", min=0.3, max=60.0)
    mpiexec_port_min: int = setting(
        21000, "lowest TCP port mpiexec (MPICH's hydra) listens on for its proxies (MPIEXEC_PORT_RANGE, set by "
        "'sectorflow up' and the session script): keep the range out of the kernel's ephemeral ports "
        "(net.ipv4.ip_local_port_range), where NodeGroups bind their data sockets: an aggregator still reconnecting "
        "to a NodeGroup that is gone would otherwise reach the next job's mpiexec on that port and end the job "
        "('cannot find proxy with ID 255')", **PORT)
    mpiexec_port_max: int = setting(21999, "highest TCP port of mpiexec's range (one port per running job on a "
                                    "host)", **PORT)

    @property
    def file_mode_bits(self) -> int | None:
        """``file_mode`` as permission bits; None when it is '' (the umask decides)."""
        return int(self.file_mode, 8) if self.file_mode else None

    @property
    def mpiexec_port_range(self) -> str:
        """MPIEXEC_PORT_RANGE for hydra: ``min:max``."""
        return f"{self.mpiexec_port_min}:{self.mpiexec_port_max}"


@dataclass(frozen=True)
class CountingConfig:
    """Electron counting (the stempy algorithm)."""

    threshold_sample_frames: int = setting(
        40, "complete frames at the start of a scan sampled for the thresholds, by each NodeGroup (stempy's "
        "electron_count on raw files samples one frame: README, 'Counting a scan on disk with stempy'; "
        "they wait in the NodeGroup's pool, packed, until the thresholds are decided, so keep it below the pool "
        "frames per counting thread: a full pool decides with the frames sampled so far)", min=1)
    threshold_share_ms: int = setting(
        1000, "a job of several NodeGroups fits each scan's thresholds once, on rank 0, from every NodeGroup's "
        "sample, so that its NodeGroups count alike; a NodeGroup whose sample is full waits this long for them, "
        "its frames in its pool, then decides from its own sample (0: each NodeGroup decides from its own at once)",
        min=0)
    background_sigma: float = setting(4.5, "background threshold = optimized mean + this x optimized sigma", min=0.0)
    xray_sigma: float = setting(175.0, "x-ray threshold = mean + this x standard deviation", min=0.0)
    background_threshold: float = setting(0.0, "fixed background threshold in ADU (0: compute from the sample)", min=0.0)
    xray_threshold: float = setting(0.0, "fixed x-ray threshold in ADU (0: compute from the sample)", min=0.0)
    dark_reference: str = setting("", "path of a .npy dark reference frame ('' for none)")
    gain: str = setting("", "path of a .npy gain map ('' for none)")


@dataclass(frozen=True)
class SimulatorConfig:
    """The detector simulator, a source for producers and tests."""

    seed: int = setting(1, "random seed; the same seed gives the same bytes", min=0)
    dose_per_frame: float = setting(20.0, "mean electrons per frame (Poisson)", min=0.0)
    electron_adu: float = setting(200.0, "mean signal of one electron in ADU", min=0.0)
    electron_spread_px: float = setting(0.7, "Gaussian spread of an electron's charge in pixels", min=0.0)
    dark_mean_adu: float = setting(20.0, "mean of the dark background", min=0.0)
    dark_sigma_adu: float = setting(
        2.1, "standard deviation of the dark noise (2.1 with the mean of 20 puts the 4.5-sigma background threshold "
        "at 29.54, half an ADU from an integer: pixel values are integers, so a threshold on one, as 30.0 at 2.2, "
        "counts the dark pixels of that value as events in one scan and not in the next)", min=0.0)
    bright_field_radius_px: float = setting(0.0, "radius of the bright-field disk (0: electrons anywhere)", min=0.0)
    dropped_fraction: float = setting(0.0, "fraction of sectors lost upstream (0.001 models UDP loss)", min=0.0, max=1.0)
    specimen: str = setting(
        "none", "what lies under the probe: 'none' (every position alike) or 'crystal' (grains on a varying "
        "thickness: the disk dims, electrons scatter into a ring from 1.5 to 2.5 disk radii, the pattern shifts; "
        "needs bright_field_radius_px > 0)", choices=("none", "crystal"))
    specimen_grain_px: float = setting(8.0, "mean grain size of the crystal, in probe positions", min=1.0)
    specimen_bright_field: float = setting(
        0.5, "fraction of the dose the thickest part of the crystal keeps from the detector", min=0.0, max=1.0)
    specimen_dark_field: float = setting(
        0.3, "largest fraction of the electrons a grain scatters into the dark-field ring", min=0.0, max=1.0)
    specimen_shift_px: float = setting(2.0, "how far a grain shifts the pattern on the detector, pixels", min=0.0)
    rate_hz: float = setting(0.0, "pace frames to this rate (0: as fast as possible)", min=0.0)
    first_frame: int = setting(
        0, "the detector's frame counter at a scan's first probe position: frame f = first_frame + position (a "
        "detector's counter need not start at 0; the raw files and the stream carry it)", min=0, max=2**32 - 1)


# At most this many virtual detectors: each costs a count per electron inside it and an image in
# the file and the live stream; the NodeGroups mark a pixel's detectors in 16 bits.
MAX_VIRTUAL_DETECTORS = 16
# Names the /virtual_images group and the live stream already use for the built-in images and arrays.
# A detector's name: an HDF5 dataset name, a live-stream field and a URL part, so kept plain.
IMAGE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,31}")
RESERVED_IMAGE_NAMES = ("com_x", "com_y", "diffraction", "position", "offsets", "events")


@dataclass(frozen=True)
class VirtualDetectorConfig:
    """One virtual detector: a region of the detector whose electrons are counted per probe position
    into an image of the scan (/virtual_images/<name> of the file, the live view, the dashboard)."""

    name: str = setting("", "name of the image: letters, digits and _, not starting with a digit, at most 32 "
                        "characters, unique; not com_x, com_y, diffraction, position, offsets or events")
    kind: str = setting("disk", "shape: 'disk' (radius), 'annulus' (inner, outer), 'rectangle' (row0, col0, rows, "
                        "cols) or 'mask' (mask)", choices=("disk", "annulus", "rectangle", "mask"))
    radius: float = setting(0.0, "disk: radius around the centre, pixels", min=0.0)
    inner: float = setting(0.0, "annulus: inner radius, pixels", min=0.0)
    outer: float = setting(0.0, "annulus: outer radius, pixels (above inner)", min=0.0)
    centre_row: float = setting(-1.0, "disk, annulus: row of the centre, pixels (negative: [analysis] centre_row)")
    centre_col: float = setting(-1.0, "disk, annulus: column of the centre (negative: [analysis] centre_col)")
    row0: int = setting(0, "rectangle: first detector row", min=0)
    col0: int = setting(0, "rectangle: first detector column", min=0)
    rows: int = setting(0, "rectangle: detector rows, at least 1", min=0)
    cols: int = setting(0, "rectangle: detector columns, at least 1", min=0)
    mask: str = setting("", "mask: a NumPy .npy file of the frame's shape, nonzero at the detector's pixels (read "
                        "where the NodeGroups start; a relative path from their working directory)")


#: The keys each kind of virtual detector reads besides name, kind (and the centre for disk and annulus).
DETECTOR_KEYS = {"disk": ("radius", "centre_row", "centre_col"),
                 "annulus": ("inner", "outer", "centre_row", "centre_col"),
                 "rectangle": ("row0", "col0", "rows", "cols"),
                 "mask": ("mask",)}


@dataclass(frozen=True)
class AnalysisConfig:
    """Virtual images the NodeGroups make while counting, and their live stream."""

    virtual_images: bool = setting(
        True, "make the virtual detectors' images, centre-of-mass images and the summed diffraction pattern from "
        "the counted electrons, into the scan's file (/virtual_images) and the live view")
    centre_row: float = setting(
        -1.0, "row of the pattern centre on the detector, pixels (negative: the frame centre): the centre of mass "
        "is taken from it, and the detectors are centred on it unless they say otherwise; read it off the summed "
        "diffraction pattern (`sectorflow view`, or /virtual_images/diffraction of a file)")
    centre_col: float = setting(-1.0, "column of the pattern centre (negative: the frame centre)")
    virtual_detectors: tuple = setting(
        (VirtualDetectorConfig(name="bright_field", kind="disk", radius=66.0),
         VirtualDetectorConfig(name="dark_field", kind="annulus", inner=90.0, outer=150.0)),
        f"the virtual detectors ([[analysis.virtual_detectors]] tables, at most {MAX_VIRTUAL_DETECTORS}), one image "
        "each; a file that lists any replaces these defaults (a bright-field disk and an annular dark-field ring "
        "for the simulator's disk of 60 px)", entry=VirtualDetectorConfig, max_entries=MAX_VIRTUAL_DETECTORS)
    analyses: tuple[str, ...] = setting(
        (), "further analyses of the registry (analysis/SPEC.md) the NodeGroups run on the counted frames, by name, "
        "beside the built-in virtual detectors, centre of mass and summed pattern (virtual_images); each one's "
        "outputs go into the file, the live view, the dashboard and `view`; a name not registered is an error "
        "naming the registered ones")
    live: bool = setting(
        True, "publish the images while a scan runs and its counted frames for other analyses (live/SPEC.md; "
        "needs virtual_images)")
    live_rate_hz: float = setting(4.0, "live updates per second per NodeGroup, at most", min=0.1, max=50.0)
    live_hwm: int = setting(
        16, "live messages queued per subscriber before more are dropped (and counted); a slow subscriber never "
        "slows counting", min=1)
    live_stall_s: float = setting(
        10.0, "a live subscriber that acknowledges no message newer than one sent this long ago is dropped, its "
        "slot (32 per stream) freed and counted (live_subscribers_dropped): a crowd that never reads cannot keep "
        "a viewer out. It may subscribe again", min=0.1, max=3600.0)
    live_buffer_frames: int = setting(
        100000, "counted frames a NodeGroup holds for the live view between two updates; beyond, frames are left "
        "out of the live view (counted: live_dropped), never out of the file", min=1)


@dataclass(frozen=True)
class SlurmConfig:
    """Streaming sessions: the batch job that runs the NodeGroups."""

    template: str = setting("slurm/session.sh.j2", "Jinja2 batch-script template, relative to configs/")
    account: str = setting("", "Slurm account ('' to omit)")
    qos: str = setting("", "quality of service ('' to omit)")
    constraint: str = setting("", "node constraint ('' to omit)")
    partition: str = setting("", "partition ('' to omit)")
    nodes: int = setting(1, "compute nodes", min=1)
    time: str = setting("00:30:00", "walltime HH:MM:SS")
    tasks_per_node: int = setting(1, "MPI ranks per node", min=1)
    launcher: str = setting("mpiexec", "how ranks are started", choices=("srun", "mpiexec"))
    environment: dict = setting({}, "environment variables exported in the job")
    image: str = setting(
        "", "an OCI image (`make image`) to run each NodeGroup rank from, in a container of its own under the "
        "job's mpiexec (image/mpi-rank), with the configuration's directory, the output directory, the session's "
        "keys and the [counting] maps mounted at their paths; '' runs the submitting venv's sectorflow")
    podman: str = setting("podman", "the podman command on the compute nodes (with image)")


@dataclass(frozen=True)
class LimitsConfig:
    """Ceilings on what a peer's message may make a service hold (protocol/SPEC.md, "Bounds")."""

    max_scan_positions: int = setting(
        2048 * 2048, "probe positions (scan_x x scan_y) of the largest scan any service accepts; a header, info "
        "message or acquire request announcing more is refused. Each open scan costs a NodeGroup counting thread "
        "one bit per position", min=1, max=65535 * 65535)
    max_open_scans: int = setting(
        16, "scans an aggregator thread or a NodeGroup keeps open at once; opening one more closes the one opened "
        "first (counted as evicted_scans, its frames written as they are)", min=1, max=1024)


@dataclass(frozen=True)
class SecurityConfig:
    """CurveZMQ on every TCP socket: who may stream, register, command or read (docs/deployment.md, "Keys")."""

    enabled: bool = setting(
        False, "encrypt every TCP socket (CURVE) and admit only the keys of key_dir: producers to the aggregator, "
        "the aggregator to NodeGroups, every role to the kvstore, which lets each role write only its own keys")
    key_dir: str = setting(
        "keys", "the beamline's certificates: <key_dir>/<role>/<name>.key, the public keys a role's parties "
        "hold (its allowlist), and on each host the <name>.key_secret of the roles it runs (made by "
        "'sectorflow keys generate ROLE NAME'); roles: kvstore, producer, aggregator, nodegroup, operator, viewer")
    plain_receivers: bool = setting(
        False, "with enabled = true, leave the receivers -> aggregator hop plain TCP (an instrument network "
        "nobody else reaches, or receivers whose own software speaks no CURVE): the aggregator's producer ports "
        "then admit whoever reaches them, so bind them (aggregator.bind_host) on that network only. The kvstore "
        "and the aggregator -> NodeGroup hop stay encrypted and authenticated")
    allow_insecure: bool = setting(
        False, "with enabled = false, let the services bind an interface other than loopback anyway (plain "
        "TCP: anyone who reaches the port may stream, register a NodeGroup, acquire or delete any key)")


@dataclass(frozen=True)
class DashboardConfig:
    """The web dashboard and its Prometheus /metrics (``sectorflow dashboard``, started by ``sectorflow up``)."""

    bind_host: str = setting("127.0.0.1", "interface the dashboard's HTTP server binds (beyond loopback only with "
                             "[security] enabled or allow_insecure)")
    port: int = setting(8750, "HTTP port of the page, its event stream and /metrics", **PORT)
    with_stack: bool = setting(True, "'sectorflow up' starts the dashboard with the stack and prints its address")
    update_ms: int = setting(500, "how often the page and /metrics are brought up to date from the kvstore replica",
                             min=50, max=60000)
    control_token_file: str = setting(
        "", "a file holding the token that lets a POST submit or cancel a session or request a scan (header "
        "'Authorization: Bearer <token>'); '' for a read-only dashboard. Its writes go through a kvstore client "
        "of role operator: with [security] on, this host needs an operator key")
    view_token_file: str = setting(
        "", "with [security] on, a file holding the token a client beyond loopback must show to read the page, "
        "/api/state, /events and /metrics ('Authorization: Bearer <token>', or once '/?token=<token>' in a "
        "browser, kept in a cookie); the control token also reads. '' : reads from loopback only")
    ssl_certfile: str = setting(
        "", "PEM certificate (chain) for HTTPS (uvicorn's ssl_certfile); with [security] on, a bind_host beyond "
        "loopback refuses to start without it")
    ssl_keyfile: str = setting("", "PEM private key of ssl_certfile")
    idle_timeout_s: int = setting(
        5, "a connection that sends no whole request this long after opening, or none this long after its last "
        "response, is closed (uvicorn's timeout_keep_alive; event streams stay open)", min=1, max=3600)
    session_log_dir: str = setting("sessions", "where a session submitted from the page writes its job log (as "
                                   "'sectorflow session submit --log-dir'), relative to the dashboard's working directory")
    recent_scans: int = setting(10, "scans listed under 'recent scans'", min=1, max=1000)

    def url(self) -> str:
        """The page's URL (what `up` prints and the tests open): loopback for a wildcard bind."""
        host = self.bind_host
        shown = "127.0.0.1" if host in ("0.0.0.0", "") else f"[{host}]" if ":" in host else host
        scheme = "https" if self.ssl_certfile else "http"
        return f"{scheme}://{shown}:{self.port}/"


@dataclass(frozen=True)
class LibertemConfig:
    """``sectorflow libertem``: the counted frames served to LiberTEM-live as asi_tpx3 (libertem_bridge/SPEC.md)."""

    with_stack: bool = setting(False, "'sectorflow up' starts the bridge with the stack, listening on listen, and "
                               "prints where; 'sectorflow down' stops it")
    listen: str = setting("127.0.0.1:8283", "HOST:PORT the bridge listens on for LiberTEM-live clients (their "
                          "asi_tpx3 data_host and data_port); a non-loopback host is refused unless the bridge "
                          "is started with --allow-remote (the stream has no key), and always with [security] on, "
                          "where a client is admitted only if its socket belongs to the bridge's own account")
    max_clients: int = setting(4, "LiberTEM-live clients served at once, each with its own queue; a further one is "
                               "refused and counted (clients_refused)", min=1, max=64)
    read_deadline_s: float = setting(
        10.0, "a client that holds bytes it has read none of for this long is dropped and counted (clients_dropped), "
        "so that one that never reads holds nothing; one idle between acquisitions holds nothing unread and stays",
        min=0.5, max=3600.0)
    empty_after_s: float = setting(
        2.0, "a position still missing this long after a later position of its scan arrived is sent to LiberTEM "
        "as an empty frame and counted (positions_empty); at the scan's end every missing one is", min=0.0, max=3600.0)
    queue_mib: int = setting(256, "stream held for a LiberTEM client that reads slower than the scans come; beyond, "
                             "the client is disconnected and its scan's frames counted as dropped", min=1, max=65536)
    chunk_bytes: int = setting(384 << 10, "largest array chunk sent (a frame larger goes alone): a chunk must fit one "
                               "shared-memory slot of LiberTEM-live's receiver (bytes_per_chunk x chunks_per_stack, "
                               "384 KiB by default: the default fills one). Fewer, larger chunks cost LiberTEM less at "
                               "high dose: with 4 MiB (and the connection's bytes_per_chunk at 174763) SumUDF takes "
                               "about 3x the frames/s at 2,000 e/frame (BENCHMARKS.md, libertem_bridge)",
                               min=1024, max=1 << 30)


@dataclass(frozen=True)
class InstrumentConfig:
    """The microscope's settings a scan's file records under /metadata/instrument, each with its unit, so
    that a reader can draw a scale bar; 0 is unknown (not recorded). ``sectorflow acquire`` may give each
    for one scan (--scan-step-nm, ...), as a microscope's control software would."""

    scan_step_nm: float = setting(0.0, "distance between neighbouring probe positions, nm (0: unknown)", min=0.0)
    detector_pixel_um: float = setting(0.0, "side of one detector pixel, micrometres (the 4D Camera's: 10; 0: "
                                       "unknown)", min=0.0)
    camera_length_mm: float = setting(0.0, "camera length, mm (0: unknown); with detector_pixel_um it gives the "
                                      "scattering angle per detector pixel", min=0.0)
    beam_energy_kev: float = setting(0.0, "energy of the beam's electrons, keV (0: unknown)", min=0.0)
    convergence_mrad: float = setting(0.0, "convergence semi-angle of the probe, mrad (0: unknown)", min=0.0)


@dataclass(frozen=True)
class LoggingConfig:
    """Logging of every service."""

    level: str = setting("INFO", "log level", choices=("DEBUG", "INFO", "WARNING", "ERROR"))


@dataclass(frozen=True)
class Config:
    """A whole beamline: detector, services and compute facility. Built by ``load_config``."""

    source: str = setting("<defaults>", "file the configuration came from")
    detector: DetectorConfig = setting(DetectorConfig(), "detector geometry")
    receivers: tuple = setting((), "receivers, one per sector, in sector order")
    kvstore: KvstoreConfig = setting(KvstoreConfig(), "state server")
    aggregator: AggregatorConfig = setting(AggregatorConfig(), "relay")
    producer: ProducerConfig = setting(ProducerConfig(), "producers")
    nodegroup: NodegroupConfig = setting(NodegroupConfig(), "NodeGroups")
    counting: CountingConfig = setting(CountingConfig(), "electron counting")
    simulator: SimulatorConfig = setting(SimulatorConfig(), "detector simulator")
    analysis: AnalysisConfig = setting(AnalysisConfig(), "virtual images and the live view")
    slurm: SlurmConfig = setting(SlurmConfig(), "Slurm sessions")
    limits: LimitsConfig = setting(LimitsConfig(), "bounds on what peers may announce")
    security: SecurityConfig = setting(SecurityConfig(), "CURVE keys and who may connect")
    dashboard: DashboardConfig = setting(DashboardConfig(), "web dashboard and Prometheus metrics")
    libertem: LibertemConfig = setting(LibertemConfig(), "the LiberTEM-live bridge")
    instrument: InstrumentConfig = setting(InstrumentConfig(), "the microscope's settings recorded in each file")
    logging: LoggingConfig = setting(LoggingConfig(), "logging")

    @property
    def n_receivers(self) -> int:
        return len(self.receivers)

    def geometry(self) -> Any:
        """The detector geometry as the C++ protocol type."""
        from sectorflow.protocol import Geometry

        d = self.detector
        return Geometry(d.frame_rows, d.frame_cols, d.sector_rows, d.sector_cols, d.itemsize)
