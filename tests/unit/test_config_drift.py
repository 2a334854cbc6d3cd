"""A running stack's configuration file edited since `up`: which keys changed, and the one line
`status` and a second `up` print."""

from __future__ import annotations

from pathlib import Path

from sectorflow.configs import DEFAULT_CONFIG, load_config
from sectorflow.operations.run_dir import changed_keys, forget_snapshot, keep_snapshot, restart_note


def test_an_edit_of_a_value_is_named_with_restart_to_apply_and_a_comment_is_no_change(tmp_path: Path) -> None:
    path = tmp_path / "beamline.toml"
    path.write_text(DEFAULT_CONFIG.read_text())
    run_dir = tmp_path / "run"
    keep_snapshot(load_config(path), run_dir)
    path.write_text("# only a comment more\n" + DEFAULT_CONFIG.read_text())
    assert restart_note(load_config(path), run_dir) is None

    path.write_text(DEFAULT_CONFIG.read_text().replace("dose_per_frame = 20.0", "dose_per_frame = 40.0")
                    .replace("scan_timeout_s = 60.0", "scan_timeout_s = 90.0"))
    edited = load_config(path)
    assert changed_keys(edited, run_dir) == ["nodegroup.scan_timeout_s", "simulator.dose_per_frame"]
    assert restart_note(edited, run_dir) == (
        f"{path} changed since the stack started (nodegroup.scan_timeout_s, simulator.dose_per_frame): restart to "
        f"apply ('sectorflow down --config {path} --run-dir {run_dir}', then 'sectorflow up --config {path} --run-dir "
        f"{run_dir}')")

    forget_snapshot(run_dir)  # `down`: nothing runs with the old file any more
    assert restart_note(edited, run_dir) is None
