"""Configuration: every shipped file loads; every kind of mistake is one line naming file and key."""

from __future__ import annotations

import dataclasses
import tomllib
from pathlib import Path
from typing import Any

import pytest
from harness import write_toml

from sectorflow.configs import (
    CONFIG_DIR,
    DEFAULT_CONFIG,
    DEFAULTS_TABLE,
    Config,
    ConfigError,
    DetectorConfig,
    ReceiverConfig,
    beamline_of,
    config_from_dict,
    load_config,
)
from sectorflow.producer.options import aggregator_endpoints, standby_endpoints
from sectorflow.protocol import MAX_PORTS


@pytest.mark.parametrize("path", sorted(CONFIG_DIR.glob("*.toml")), ids=lambda p: p.name)
def test_every_shipped_config_loads(path: Path) -> None:
    config = load_config(path)
    assert config.n_receivers == config.detector.n_sectors
    assert config.source == str(path)


def test_local_is_the_default_and_runs_everything_on_loopback() -> None:
    config = load_config()
    assert config.source == str(DEFAULT_CONFIG)
    hosts = {config.kvstore.host, config.aggregator.host, config.nodegroup.host} | {r.host for r in config.receivers}
    assert hosts == {"127.0.0.1"}


def test_4dcamera_has_the_real_geometry() -> None:
    config = load_config(CONFIG_DIR / "4dcamera.toml")
    d = config.detector
    assert (d.frame_rows, d.frame_cols, d.sector_rows, d.sector_cols, d.dtype) == (576, 576, 144, 576, "uint16")
    assert config.n_receivers == 4 and all(r.threads > 1 for r in config.receivers)
    assert config.geometry().sector_bytes == 144 * 576 * 2


def test_the_kvstore_pair_4dcamera_shows_loads_once_uncommented(tmp_path: Path) -> None:
    text = (CONFIG_DIR / "4dcamera.toml").read_text()
    assert text.count("\n# servers = ") == 1
    path = tmp_path / "4dcamera-pair.toml"
    path.write_text(text.replace("\n# servers = ", "\nservers = "))
    config = load_config(path)
    assert config.kvstore.servers == ("aggregator.beamline.example:5556", "kvstore-backup.beamline.example:5556")


def local(**changes: Any) -> dict:
    data = tomllib.loads(DEFAULT_CONFIG.read_text())
    for table, values in changes.items():
        if isinstance(values, dict):
            data.setdefault(table, {}).update(values)
        else:
            data[table] = values
    return data


def error_of(data: dict) -> str:
    with pytest.raises(ConfigError) as error:
        config_from_dict(data, source="beamline.toml")
    message = str(error.value)
    assert "\n" not in message
    return message


def test_typo_in_a_key_suggests_the_right_one() -> None:
    assert error_of(local(kvstore={"prot": 1})) == "beamline.toml: unknown key 'kvstore.prot'; did you mean 'port'?"


def test_unknown_table_is_named() -> None:
    assert "unknown key 'agregator'; did you mean 'aggregator'?" in error_of(local(agregator={"hwm": 1}))


def test_wrong_type_names_key_and_expectation() -> None:
    message = error_of(local(aggregator={"hwm": "many"}))
    assert message.startswith("beamline.toml: 'aggregator.hwm' = 'many': expected an integer")


def test_boolean_is_not_taken_for_an_integer() -> None:
    assert "'nodegroup.groups_per_rank' = True: expected an integer" in error_of(local(nodegroup={"groups_per_rank": True}))


def test_port_out_of_range() -> None:
    message = error_of(local(aggregator={"base_port": 70000}))
    assert "'aggregator.base_port' = 70000: expected a value from 1 to 65535" in message


def test_thread_ports_past_65535_are_rejected() -> None:
    assert "thread ports up to base_port + 3 = 65537 must stay below 65536" in error_of(
        local(aggregator={"base_port": 65534}))


def test_kvstore_bounds_have_their_ranges_and_ttl_fits_under_the_clamp() -> None:
    kv = load_config().kvstore
    assert (kv.max_value_bytes, kv.max_keys, kv.max_map_bytes) == (65536, 100_000, 256 << 20)
    assert (kv.max_keys_per_address, kv.max_map_bytes_per_address, kv.max_ttl_s) == (25_000, 64 << 20, 86400.0)
    assert "'kvstore.max_value_bytes' = 100: expected a value from 1024 to 67108864" in error_of(
        local(kvstore={"max_value_bytes": 100}))
    assert error_of(local(kvstore={"ttl_s": 30.0, "max_ttl_s": 10.0})) == (
        "beamline.toml: 'kvstore.ttl_s' = 30.0 is above 'kvstore.max_ttl_s' = 10.0: the server would clamp every "
        "registration's ttl; raise max_ttl_s")


def test_sectors_that_do_not_tile_the_frame() -> None:
    message = error_of(local(detector={"sector_rows": 100}))
    assert "[detector] sectors of 100 x 576 do not tile a frame of 576 x 576" in message


def test_receiver_count_must_match_sectors() -> None:
    data = local()
    data["receivers"] = data["receivers"][:3]
    assert "'receivers' lists 3 receivers but the detector has 4 sectors" in error_of(data)


def test_unknown_key_inside_a_receiver() -> None:
    data = local()
    data["receivers"][1]["thread"] = 2
    assert "unknown key 'receivers[1].thread'; did you mean 'threads'?" in error_of(data)


def test_choice_outside_the_allowed_set() -> None:
    assert "'slurm.launcher' = 'aprun': expected one of 'srun', 'mpiexec'" in error_of(local(slurm={"launcher": "aprun"}))


def test_table_where_a_value_belongs() -> None:
    assert "[kvstore]: expected a table, got an integer" in error_of(local(kvstore=5))


def test_missing_file_lists_the_shipped_ones(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"no such configuration file \(shipped ones: 4dcamera.toml, local.toml"):
        load_config(tmp_path / "nope.toml")


def test_invalid_toml_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "broken.toml"
    path.write_text("[kvstore\nport = 1\n")
    with pytest.raises(ConfigError, match=f"{path}: not valid TOML"):
        load_config(path)


def test_a_non_4dcamera_geometry_is_accepted(tmp_path: Path) -> None:
    data = local(detector={"frame_rows": 32, "frame_cols": 64, "sector_rows": 16, "sector_cols": 32})
    data["receivers"] = [{"host": "127.0.0.1", "threads": 2}] * 4
    config = load_config(write_toml(data, tmp_path / "small.toml"))
    assert config.detector.n_sectors == 4
    assert config.geometry().sector_row0(3) == 16 and config.geometry().sector_col0(3) == 32


def test_config_objects_are_frozen() -> None:
    config = load_config()
    with pytest.raises(AttributeError):
        config.kvstore.port = 1  # type: ignore[misc]


def test_the_configuration_reference_matches_the_schema() -> None:
    from sectorflow.configs.reference import reference_markdown

    readme = (Path(__file__).resolve().parents[2] / "docs" / "configuration.md").read_text()
    begin = readme.index("<!-- reference:begin")
    section = readme[readme.index("\n", begin) + 1 : readme.index("<!-- reference:end -->")]
    assert section.strip() == reference_markdown().strip(), "regenerate with python -m sectorflow.configs.reference"


def test_defaults_table_matches_the_schema() -> None:
    from sectorflow.configs.defaults import defaults_toml

    assert DEFAULTS_TABLE.read_text() == defaults_toml(), (
        "regenerate with python -m sectorflow.configs.defaults > configs/defaults.toml"
    )


@pytest.mark.parametrize("path", sorted(CONFIG_DIR.glob("*.toml")), ids=lambda p: p.name)
def test_a_loaded_configuration_reaches_the_cpp_mappings_with_every_value(path: Path) -> None:
    # The services hand their Config to the C++ mappings of the option structs as a Beamline: each
    # key must arrive as the loader left it, overrides and text beyond ASCII included.
    config = load_config(path)
    config = dataclasses.replace(config, producer=dataclasses.replace(config.producer, fallback_dir="/tmp/ß 🐛\x7f\"x"))
    beamline = beamline_of(config)
    assert beamline.source == str(path) and beamline.receivers == config.n_receivers
    read = {bool: beamline.boolean, int: beamline.integer, float: beamline.number, str: beamline.text}
    for table in dataclasses.fields(Config):
        values = getattr(config, table.name)
        if not dataclasses.is_dataclass(values):
            continue
        for key in dataclasses.fields(values):
            value = getattr(values, key.name)
            if type(value) in read:
                assert read[type(value)](f"{table.name}.{key.name}") == value, (table.name, key.name)
            elif isinstance(value, tuple) and all(isinstance(item, str) for item in value):
                assert beamline.texts(f"{table.name}.{key.name}") == list(value), (table.name, key.name)
    for r, receiver in enumerate(config.receivers):
        assert beamline.integer(f"receivers[{r}].threads") == receiver.threads
        assert beamline.text(f"receivers[{r}].wire") == receiver.wire


def test_the_aggregator_takes_its_options_from_the_one_mapping() -> None:
    from sectorflow.aggregator.options import aggregator_options

    config = config_from_dict(local(aggregator={"hwm": 7, "native_scan_idle_s": 0.25, "tier": ["a", "b"]}),
                              source="beamline.toml")
    options = aggregator_options(config, member=1)
    assert (options.member, options.members, options.base_port, options.hwm) == (1, 2, 6100, 7)
    assert options.native_scan_idle_s == 0.25
    assert options.discovery_wait_ms == config.kvstore.silence_heartbeats * config.kvstore.heartbeat_ms
    assert options.producer_threads == [r.threads for r in config.receivers]
    assert options.wire == [r.wire for r in config.receivers]
    assert options.max_open_scans == config.limits.max_open_scans
    with pytest.raises(ConfigError, match=r"^aggregator member 2: beamline.toml has a tier of 2 \(\[aggregator\] tier\), "
                       r"expected 0 to 1$"):
        aggregator_options(config, member=2)


def test_defaults_table_loads_as_every_key_at_its_default() -> None:
    config = load_config(DEFAULTS_TABLE)
    for f in dataclasses.fields(Config):
        if f.name == "receivers":
            assert config.receivers == (ReceiverConfig(),) * DetectorConfig().n_sectors
        elif f.name != "source":
            assert getattr(config, f.name) == f.default, f.name


def test_kvstore_servers_are_a_pair_of_host_and_port_at_most() -> None:
    assert load_config().kvstore.servers == ()
    pair = config_from_dict(local(kvstore={"servers": ["10.0.0.1:5556", "kv-b.example:6000"]}))
    assert pair.kvstore.servers == ("10.0.0.1:5556", "kv-b.example:6000")
    assert pair.kvstore.address == "10.0.0.1:5556 or kv-b.example:6000"  # what messages name
    assert load_config().kvstore.address == "127.0.0.1:5556"
    assert error_of(local(kvstore={"servers": "10.0.0.1:5556"})).startswith(
        "beamline.toml: 'kvstore.servers' = '10.0.0.1:5556': expected an array of strings (")
    assert error_of(local(kvstore={"servers": ["a:1", 2]})).startswith(
        "beamline.toml: 'kvstore.servers' = ['a:1', 2]: expected an array of strings (")
    assert error_of(local(kvstore={"servers": ["a:1", "b"]})) == (
        "beamline.toml: 'kvstore.servers[1]' = 'b': expected \"host:port\" (a server's address and its snapshot "
        "port P)")
    for bad in (":5556", "a:", "a:port", "a:-1"):
        assert "expected \"host:port\"" in error_of(local(kvstore={"servers": [bad]})), bad
    assert error_of(local(kvstore={"servers": ["a:65534"]})) == (
        "beamline.toml: 'kvstore.servers[0]' = 'a:65534': port 65534 out of range: expected 1 to 65533 (the server "
        "uses P, P + 1 and P + 2)")
    assert "port 0 out of range" in error_of(local(kvstore={"servers": ["a:0"]}))
    assert error_of(local(kvstore={"servers": ["a:1", "a:1"]})) == (
        "beamline.toml: 'kvstore.servers[1]' = 'a:1' is listed twice: the pair is two different servers")
    assert error_of(local(kvstore={"servers": ["a:1", "b:1", "c:1"]})) == (
        "beamline.toml: 'kvstore.servers' lists 3 servers: a kvstore pair (Binary Star) is a primary and a backup, so "
        "at most 2")



def test_a_standby_s_lease_must_outlast_a_kvstore_failover() -> None:
    # The holder must see a renewal come back through the new active before it fences itself: with
    # the 1 s heartbeat and 3 silent heartbeats, 8 s; a shorter heartbeat allows a shorter lease.
    standby = {"standby_host": "127.0.0.2"}
    assert config_from_dict(local(aggregator=standby)).aggregator.takeover_s == 8.0
    assert error_of(local(aggregator={**standby, "takeover_s": 3.0})) == (
        "beamline.toml: 'aggregator.takeover_s' = 3 is too short for a kvstore failover: the active aggregator's "
        "client needs up to (silence_heartbeats 3 + 2) heartbeats of 1000 ms = 5 s to find the new active and would "
        "stop relaying meanwhile; set takeover_s to at least 8 (or shorten kvstore.heartbeat_ms)")
    fast = config_from_dict(local(aggregator={**standby, "takeover_s": 1.6}, kvstore={"heartbeat_ms": 200}))
    assert fast.aggregator.takeover_s == 1.6
    assert "at least 9.6" in error_of(local(aggregator={**standby, "takeover_s": 9.0},
                                            kvstore={"silence_heartbeats": 4}))
    # Without a standby there is no lease: takeover_s is not used.
    assert config_from_dict(local(aggregator={"takeover_s": 0.5})).aggregator.takeover_s == 0.5


def test_an_aggregation_tier_lists_its_members_takes_a_standby_and_refuses_too_many() -> None:
    assert config_from_dict(local()).aggregator.hosts == ("127.0.0.1",)  # no tier: one aggregator at host
    three = config_from_dict(local(aggregator={"tier": ["a", "b", "c"]}))
    assert three.aggregator.hosts == ("a", "b", "c")
    # One standby host stands in for any member, on that member's ports.
    spare = config_from_dict(local(aggregator={"tier": ["a", "b"], "standby_host": "s"}))
    assert standby_endpoints(spare, 1) == ["tcp://s:6101", "tcp://s:6105"]
    assert aggregator_endpoints(spare, 1) == ["tcp://a:6101", "tcp://b:6105"]
    assert standby_endpoints(three, 1) == []
    assert error_of(local(aggregator={"tier": [f"h{i}" for i in range(17)]})) == (
        "beamline.toml: 'aggregator.tier' lists 17 aggregators, at most 16")
    # 16 receivers of a 1024-row detector through 16 aggregators: 256 relay threads, the most a NodeGroup binds.
    sixteen = {"frame_rows": 1024, "frame_cols": 1024, "sector_rows": 64, "sector_cols": 1024}
    many = [{"host": "127.0.0.1"}] * 16
    assert config_from_dict(local(detector=sixteen, receivers=many,
                                  aggregator={"tier": [f"h{i}" for i in range(16)]})).n_receivers == 16
    assert MAX_PORTS == 256 and error_of(local(detector={**sixteen, "sector_rows": 32}, receivers=many * 2,
                                                aggregator={"tier": [f"h{i}" for i in range(16)]})) == (
        "beamline.toml: 'aggregator.tier' lists 16 aggregators for 32 receivers: 512 relay threads, and a NodeGroup "
        "binds a data port for each, at most 256; list fewer aggregators")
    assert error_of(local(aggregator={"tier": ["a", "b"], "base_port": 65530})) == (
        "beamline.toml: 'aggregator.base_port' = 65530: relay thread ports up to base_port + 7 = 65537 "
        "must stay below 65536")


def test_4dcamera_shows_a_tier_of_five_hosts() -> None:
    config = load_config(CONFIG_DIR / "4dcamera.toml")
    assert len(config.aggregator.hosts) == 5 and len(set(config.aggregator.hosts)) == 5

def detectors(*entries: dict[str, Any]) -> dict:
    data = local()
    data["analysis"]["virtual_detectors"] = list(entries)
    return data


BRIGHT = {"name": "bright_field", "kind": "disk", "radius": 66.0}
DARK = {"name": "dark_field", "kind": "annulus", "inner": 90.0, "outer": 150.0}


def test_shipped_configs_keep_the_bright_and_dark_field_detectors() -> None:
    for path in sorted(p for p in CONFIG_DIR.glob("*.toml") if p != DEFAULTS_TABLE):
        shipped = load_config(path).analysis.virtual_detectors
        assert [(d.name, d.kind) for d in shipped] == [("bright_field", "disk"), ("dark_field", "annulus")], path
        assert (shipped[0].radius, shipped[1].inner, shipped[1].outer) == (66.0, 90.0, 150.0), path


def test_a_rectangle_detector_is_read_with_its_geometry() -> None:
    probe = {"name": "probe", "kind": "rectangle", "row0": 10, "col0": 20, "rows": 30, "cols": 40}
    config = config_from_dict(detectors(BRIGHT, DARK, probe))
    d = config.analysis.virtual_detectors[2]
    assert (d.name, d.kind, d.row0, d.col0, d.rows, d.cols) == ("probe", "rectangle", 10, 20, 30, 40)


@pytest.mark.parametrize(("entries", "expected"), [
    ([{"name": "x", "kind": "square"}], "'analysis.virtual_detectors[0].kind' = 'square': expected one of 'disk'"),
    ([BRIGHT, {**DARK, "name": "bright_field"}], "'analysis.virtual_detectors[1]': name = 'bright_field' is "
                                                  "already the name of another virtual detector"),
    ([{**BRIGHT, "radius": 0.0}], "(bright_field): a disk needs a radius above 0, got radius = 0.0"),
    ([{**BRIGHT, "radius": -3.0}], "'analysis.virtual_detectors[0].radius' = -3.0: expected a value at least 0.0"),
    ([{**DARK, "inner": 150.0, "outer": 90.0}], "(dark_field): an annulus needs outer above inner"),
    ([{**BRIGHT, "inner": 5.0}], "(bright_field): 'inner' is not a key of a disk; a disk takes radius"),
    ([{"name": "box", "kind": "rectangle", "rows": 4}], "(box): a rectangle needs rows and cols of at least 1"),
    ([{"name": "box", "kind": "rectangle", "row0": 570, "rows": 10, "cols": 1}],
     "(box): rows 570 to 579, columns 0 to 0 reach past the 576 x 576 frame"),
    ([{"kind": "disk", "radius": 3.0}], "'analysis.virtual_detectors[0]' has no name"),
    ([{"name": "2nd", "kind": "disk", "radius": 3.0}], "name = '2nd': expected letters, digits and _"),
    ([{"name": "com_x", "kind": "disk", "radius": 3.0}], "not one of com_x, com_y, diffraction"),
    ([{"name": "b", "radius": 3.0}], "(b) has no kind"),
    ([{**BRIGHT, "name": f"d{i}"} for i in range(17)], "'analysis.virtual_detectors' lists 17 tables, at most 16"),
    ([{**BRIGHT, "radus": 3.0}], "unknown key 'analysis.virtual_detectors[0].radus'; did you mean 'radius'?"),
    ([{"name": "grains", "kind": "mask"}], "(grains): a mask needs mask = the path of a .npy file"),
    ([{**BRIGHT, "mask": "m.npy"}], "(bright_field): 'mask' is not a key of a disk"),
])
def test_a_bad_virtual_detector_is_one_line_naming_it(entries: list[dict[str, Any]], expected: str) -> None:
    assert expected in error_of(detectors(*entries))


def test_virtual_detectors_must_be_an_array_of_tables() -> None:
    data = local(analysis={"virtual_detectors": "bright_field"})
    assert "'analysis.virtual_detectors' must be an array of tables" in error_of(data)


def test_the_retired_detector_keys_say_what_replaced_them() -> None:
    message = error_of(local(analysis={"bright_field_radius_px": 66.0}))
    assert "'analysis.bright_field_radius_px' is no longer a key: " in message
    assert "[[analysis.virtual_detectors]]" in message


def test_an_analysis_not_registered_is_one_line_naming_the_closest() -> None:
    message = error_of(local(analysis={"analyses": ["virtual_detector"]}))
    assert message == ("beamline.toml: [analysis] analyses: no analysis is named 'virtual_detector'; "
                       "did you mean 'virtual_detectors'?")


def test_a_virtual_detector_named_like_another_analysiss_output_is_one_line() -> None:
    data = detectors(BRIGHT, {**BRIGHT, "name": "radial_profile"})
    data["analysis"]["analyses"] = ["radial_profile"]
    assert error_of(data) == ("beamline.toml: 'analysis.virtual_detectors' names a detector 'radial_profile', which "
                              "is also an output of another analysis (an image's name must be unique): rename the "
                              "detector")
    data["analysis"]["analyses"] = []
    assert config_from_dict(data, source="beamline.toml").analysis.virtual_detectors[1].name == "radial_profile"


def test_file_mode_is_octal_permissions_or_empty() -> None:
    assert config_from_dict(local(nodegroup={"file_mode": "0640"}), source="b.toml").nodegroup.file_mode_bits == 0o640
    assert config_from_dict(local(), source="b.toml").nodegroup.file_mode_bits is None  # the umask decides
    assert error_of(local(nodegroup={"file_mode": "rw-r-----"})) == (
        "beamline.toml: 'nodegroup.file_mode' = 'rw-r-----': expected permissions in octal, such as '0640' (owner "
        "reads and writes, group reads), or '' to follow the umask")
