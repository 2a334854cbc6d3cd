"""The batch script of a streaming session, as `sectorflow session submit --dry-run` prints it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from sectorflow.configs import CONFIG_DIR, load_config
from sectorflow.errors import SectorflowError
from sectorflow.operations import SessionRequest, render_script


def dry_run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sectorflow", "session", "submit", "--dry-run", *args],
                          capture_output=True, text=True, timeout=60)


def test_dry_run_prints_the_directives_of_the_configuration() -> None:
    result = dry_run("--config", str(CONFIG_DIR / "4dcamera.toml"))
    assert result.returncode == 0, result.stderr
    for line in ("#SBATCH --nodes=4", "#SBATCH --ntasks-per-node=1", "#SBATCH --time=04:00:00",
                 "#SBATCH --account=m0000", "#SBATCH --qos=realtime", "#SBATCH --constraint=cpu",
                 "export OMP_NUM_THREADS=1"):
        assert line in result.stdout.splitlines()
    assert "exec srun --mpi=pmi2 " in result.stdout
    assert f"-m sectorflow nodegroup --config {CONFIG_DIR / '4dcamera.toml'}" in result.stdout


def test_options_override_nodes_and_time_and_empty_settings_are_omitted() -> None:
    result = dry_run("--nodes", "3", "--time", "01:30")
    assert result.returncode == 0, result.stderr
    assert "#SBATCH --nodes=3" in result.stdout and "#SBATCH --time=01:30" in result.stdout
    assert "--account" not in result.stdout and "--qos" not in result.stdout
    lines = result.stdout.splitlines()
    launch = next(n for n, line in enumerate(lines) if line.startswith('exec mpiexec -n "$SLURM_NTASKS" '))
    # hydra's control port outside the ephemeral range, where a NodeGroup gone leaves reconnecting peers
    assert lines[launch - 1] == "export MPIEXEC_PORT_RANGE=21000:21999"


def test_output_directory_is_passed_to_the_nodegroups(tmp_path: Path) -> None:
    request = SessionRequest.from_config(load_config(), tmp_path, output_dir=tmp_path / "h5")
    assert f"--output {tmp_path / 'h5'}" in render_script(request)


def test_bad_walltime_is_one_line_error() -> None:
    result = dry_run("--time", "1h")
    assert result.returncode == 1
    assert result.stderr == "sectorflow session: error: walltime '1h': expected HH:MM, HH:MM:SS or D-HH:MM:SS\n"


def test_zero_nodes_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SectorflowError, match="--nodes 0: a session needs at least one node"):
        SessionRequest.from_config(load_config(), tmp_path, nodes=0)


def test_missing_template_names_the_path(make_config, tmp_path: Path) -> None:
    config, _ = make_config(slurm={"template": str(tmp_path / "nope.j2")})
    with pytest.raises(SectorflowError, match=f"Slurm template {tmp_path / 'nope.j2'} not found"):
        render_script(SessionRequest.from_config(config, tmp_path))


def test_with_an_image_each_rank_runs_in_its_container_with_what_it_reads_mounted(make_config, tmp_path: Path) -> None:
    dark = tmp_path / "maps" / "dark.npy"
    dark.parent.mkdir()
    _, path = make_config(slurm={"image": "localhost/sectorflow:latest", "podman": "/opt/bin/podman"},
                          counting={"dark_reference": str(dark)})
    out = tmp_path / "counted"
    result = dry_run("--config", str(path), "--output", str(out))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert f"mkdir -p {out}  # a container mounts it: it must exist" in lines
    assert "export PODMAN=/opt/bin/podman" in lines
    wrapper = CONFIG_DIR.parent / "image" / "mpi-rank"
    assert wrapper.is_file()
    assert (f'exec mpiexec -n "$SLURM_NTASKS" sh {wrapper} -v {path.parent}:{path.parent}:ro '
            f"-v {dark.parent}:{dark.parent}:ro -v {out}:{out} localhost/sectorflow:latest nodegroup --config {path} "
            f"--output {out}") in lines
    assert "-m sectorflow" not in result.stdout  # the image's sectorflow, not the venv's

    _, srun = make_config(slurm={"image": "localhost/sectorflow:latest", "launcher": "srun"})
    refused = dry_run("--config", str(srun))
    assert refused.returncode != 0 and refused.stderr.count("\n") == 1, refused.stderr
    assert 'set [slurm] launcher = "mpiexec"' in refused.stderr
