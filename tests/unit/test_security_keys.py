"""Keys, the key directory and the safe defaults of [security], one module at a time."""

from __future__ import annotations

import stat
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import zmq.auth
from harness import write_toml

from sectorflow.configs import CONFIG_DIR, DEFAULT_CONFIG, ConfigError, config_from_dict, load_config
from sectorflow.operations import SessionRequest, render_script
from sectorflow.security import KeyDirectory, SecurityError, read_certificate
from sectorflow.security.keys import generate
from sectorflow.security.options import aggregator_curves, aggregator_keys, data_client_curve, kvstore_client_curve
from sectorflow.security.session_keys import make_session_key_dir


def sectorflow(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sectorflow", *args], capture_output=True, text=True, timeout=60)


def local(**overrides: dict) -> dict:
    data = tomllib.loads(DEFAULT_CONFIG.read_text())
    for table, values in overrides.items():
        data.setdefault(table, {}).update(values)
    return data


def test_generate_writes_a_pair_zmq_auth_reads_with_the_secret_private(tmp_path: Path) -> None:
    public, secret = generate(tmp_path, "producer", "receiver-0")
    assert (public, secret) == (tmp_path / "producer" / "receiver-0.key", tmp_path / "producer" / "receiver-0.key_secret")
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600
    assert stat.S_IMODE(public.stat().st_mode) == 0o644
    public_key, secret_key = zmq.auth.load_certificate(secret)
    assert zmq.auth.load_certificate(public) == (public_key, None)
    ours = read_certificate(str(secret))
    assert (ours.public_key.encode(), ours.secret_key.encode()) == (public_key, secret_key)
    assert secret_key.decode() not in public.read_text()
    assert "secret_key=<hidden>" in repr(ours) and ours.secret_key not in repr(ours)


def test_certificates_zmq_auth_writes_are_read(tmp_path: Path) -> None:
    public, secret = zmq.auth.create_certificates(str(tmp_path), "pyzmq")
    assert read_certificate(public).public_key.encode() == zmq.auth.load_certificate(public)[0]
    assert read_certificate(secret).secret_key.encode() == zmq.auth.load_certificate(secret)[1]


def test_generate_never_overwrites_and_refuses_unknown_roles(tmp_path: Path) -> None:
    generate(tmp_path, "operator", "alice")
    with pytest.raises(SecurityError, match="alice.key: exists; a key pair is never overwritten"):
        generate(tmp_path, "operator", "alice")
    with pytest.raises(SecurityError, match="no role 'admin'; the roles are kvstore, producer"):
        generate(tmp_path, "admin", "eve")
    with pytest.raises(SecurityError, match="expected a plain file name"):
        generate(tmp_path, "operator", "../eve")


def test_keys_cli_generates_and_lists_without_secrets(tmp_path: Path) -> None:
    made = sectorflow("keys", "generate", "nodegroup", "session", "--key-dir", str(tmp_path))
    assert made.returncode == 0, made.stderr
    assert "secret key: " in made.stdout and "0600" in made.stdout
    listed = sectorflow("keys", "list", "--key-dir", str(tmp_path))
    assert listed.returncode == 0, listed.stderr
    certificate = read_certificate(str(tmp_path / "nodegroup" / "session.key_secret"))
    assert certificate.public_key in listed.stdout and certificate.secret_key not in listed.stdout
    bad = sectorflow("keys", "list", "--key-dir", str(tmp_path / "nope"))
    assert bad.returncode == 1 and len(bad.stderr.splitlines()) == 1
    assert "no such key directory" in bad.stderr


def test_key_directory_names_what_is_missing_or_ambiguous(tmp_path: Path) -> None:
    keys = KeyDirectory(str(tmp_path))
    with pytest.raises(SecurityError, match=r"producer: no secret key of role producer .*sectorflow keys generate"):
        keys.own("producer")
    generate(tmp_path, "producer", "a")
    generate(tmp_path, "producer", "b")
    with pytest.raises(SecurityError, match="2 secret keys of role producer; keep only this host's"):
        keys.own("producer")
    assert set(keys.allowlist(["producer"]).values()) == {"producer/a", "producer/b"}
    with pytest.raises(SecurityError, match="no public certificate of the aggregator"):
        keys.public_key("aggregator")
    (tmp_path / "kvstore").mkdir()
    (tmp_path / "kvstore" / "broken.key").write_text("curve\n    public-key = \"short\"\n")
    with pytest.raises(SecurityError, match="broken.key: public-key is not a Z85 CurveZMQ key"):
        keys.public_key("kvstore")


def test_security_off_gives_plain_sockets() -> None:
    config = load_config()
    assert not kvstore_client_curve(config, "operator").enabled
    assert not data_client_curve(config, "producer").enabled
    assert not any(curve.enabled for curve in aggregator_curves(config))


def test_each_listener_admits_its_roles(tmp_path: Path) -> None:
    for role, name in (("kvstore", "s"), ("aggregator", "a"), ("producer", "p"), ("nodegroup", "n"),
                       ("operator", "o")):
        generate(tmp_path, role, name)
    config = config_from_dict(local(security={"enabled": True, "key_dir": str(tmp_path)}))
    producers, nodegroups = aggregator_curves(config)
    assert sorted(producers.peers.values()) == ["producer/p"] and producers.domain == "producers"
    assert sorted(nodegroups.peers.values()) == ["nodegroup/n"] and nodegroups.domain == "nodegroups"
    assert producers.secret_key == read_certificate(str(tmp_path / "aggregator" / "a.key_secret")).secret_key
    # A host without a viewer key looks with its operator key.
    viewer = kvstore_client_curve(config, "viewer")
    assert viewer.public_key == read_certificate(str(tmp_path / "operator" / "o.key")).public_key
    assert viewer.server_key == read_certificate(str(tmp_path / "kvstore" / "s.key")).public_key
    assert "secret" not in repr(viewer).lower()


def test_each_member_of_a_tier_proves_its_own_key(tmp_path: Path) -> None:
    # Each aggregator host of a tier holds its own pair, aggregator/member-<i>; the
    # producers and NodeGroups hold every member's public certificate and ask each socket's member for its own.
    for role, name in (("kvstore", "s"), ("aggregator", "member-0"), ("aggregator", "member-1"),
                       ("aggregator", "member-2"), ("producer", "p"), ("nodegroup", "n")):
        generate(tmp_path, role, name)
    config = config_from_dict(local(security={"enabled": True, "key_dir": str(tmp_path)},
                                    aggregator={"tier": ["a", "b", "c"]}))
    public = [read_certificate(str(tmp_path / "aggregator" / f"member-{i}.key")).public_key for i in range(3)]
    producers, nodegroups = aggregator_curves(config, member=1)
    assert producers.public_key == nodegroups.public_key == public[1]
    assert aggregator_keys(config, "producer") == aggregator_keys(config, "nodegroup") == public
    assert data_client_curve(config, "nodegroup").server_key == public[0]
    # Without a tier the folder's one pair is the aggregator's (here three: refused, naming them).
    with pytest.raises(SecurityError, match="3 secret keys of role aggregator"):
        aggregator_curves(config_from_dict(local(security={"enabled": True, "key_dir": str(tmp_path)})))
    # A member whose pair is not on this host is refused in one line naming the file and the command.
    (tmp_path / "aggregator" / "member-2.key_secret").unlink()
    with pytest.raises(SecurityError, match=r"member-2.key_secret: no secret key of aggregator member-2; make one "
                                            r"with 'sectorflow keys generate aggregator member-2'"):
        aggregator_curves(config, member=2)


@pytest.mark.parametrize("table,key", [("kvstore", "bind_host"), ("aggregator", "bind_host"), ("nodegroup", "host")])
def test_a_non_loopback_bind_without_security_is_refused(table: str, key: str) -> None:
    with pytest.raises(ConfigError) as refused:
        config_from_dict(local(**{table: {key: "0.0.0.0"}}), source="beamline.toml")
    assert str(refused.value).startswith(f"beamline.toml: '{table}.{key}' = '0.0.0.0' listens beyond this machine "
                                         "without security")
    assert "allow_insecure = true" in str(refused.value)
    config = config_from_dict(local(**{table: {key: "0.0.0.0"}, "security": {"allow_insecure": True}}))
    assert config.security.allow_insecure
    assert config_from_dict(local(**{table: {key: "localhost"}})).security.enabled is False


def test_the_shipped_beamline_configuration_turns_security_on_and_binds_per_interface() -> None:
    config = load_config(CONFIG_DIR / "4dcamera.toml")
    assert config.security.enabled and not config.security.allow_insecure
    assert config.kvstore.bind_host not in ("0.0.0.0", "*") and config.aggregator.bind_host not in ("0.0.0.0", "*")


def test_a_bad_security_key_is_one_line(tmp_path: Path) -> None:
    path = write_toml(local(security={"enabled": "yes"}), tmp_path / "bad.toml")
    result = sectorflow("status", "--config", str(path))
    assert result.returncode == 2
    assert result.stderr.startswith(f"sectorflow status: error: {path}: 'security.enabled' = 'yes': expected true or false")


def test_a_session_gets_its_keys_in_a_private_directory_the_script_only_names(tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    for role, name in (("kvstore", "s"), ("aggregator", "a"), ("nodegroup", "session"), ("operator", "o"),
                       ("producer", "p")):
        generate(keys, role, name)
    config = config_from_dict(local(security={"enabled": True, "key_dir": str(keys)}))
    session_dir = make_session_key_dir(config, tmp_path / "sessions")
    assert stat.S_IMODE(session_dir.stat().st_mode) == 0o700
    copied = sorted(str(p.relative_to(session_dir)) for p in session_dir.rglob("*") if p.is_file())
    # The operators' and viewers' public keys: the allowlist of the NodeGroups' live stream.
    assert copied == ["aggregator/a.key", "kvstore/s.key", "nodegroup/session.key", "nodegroup/session.key_secret",
                      "operator/o.key"]
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in session_dir.rglob("*") if p.is_file())
    script = render_script(SessionRequest(config.slurm, Path("/c.toml"), tmp_path, key_dir=session_dir))
    assert f"--key-dir {session_dir}" in script
    for file in keys.rglob("*.key_secret"):
        assert read_certificate(str(file)).secret_key not in script
    # What the NodeGroups then load is the session's copy.
    assert KeyDirectory(str(session_dir)).own("nodegroup").public_key == read_certificate(
        str(keys / "nodegroup" / "session.key")).public_key


def test_plain_receivers_leave_only_the_receivers_hop_plain(tmp_path: Path) -> None:
    for role, name in (("kvstore", "s"), ("aggregator", "a"), ("producer", "p"), ("nodegroup", "n")):
        generate(tmp_path, role, name)
    config = config_from_dict(local(security={"enabled": True, "key_dir": str(tmp_path), "plain_receivers": True}))
    producers, nodegroups = aggregator_curves(config)
    assert not producers.enabled and nodegroups.enabled
    assert not data_client_curve(config, "producer").enabled
    assert data_client_curve(config, "nodegroup").enabled
    assert kvstore_client_curve(config, "producer").enabled  # the kvstore stays authenticated


def test_an_empty_allowlist_is_said_once_at_start(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    generate(tmp_path, "aggregator", "a")
    config = config_from_dict(local(security={"enabled": True, "key_dir": str(tmp_path)}))
    with caplog.at_level("WARNING"):
        producers, _ = aggregator_curves(config)
    assert producers.peers == {}
    assert f"{tmp_path}: no public certificate of producer (<role>/*.key): the producers sockets admit nobody" \
        in caplog.text
