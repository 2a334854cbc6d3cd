"""The operator's room: what a person at the microscope does with a running stack.

``sectorflow acquire`` (acquire.py: a scan's number, request and progress, progress.py) and
``sectorflow abort`` (abort.py), a scan's life in the kvstore (scan_life.py: claims, aborts), its
account from every service's records (scan_account.py: counted + spilled + missing and why),
``sectorflow status`` (status_cli.py, status_table.py) and streaming sessions of NodeGroups as
Slurm jobs (``sectorflow session``: session_cli.py, session_script.py, slurm.py). The command line
and the dashboard both use these; the services never import them.
"""

from .session_script import JOB_NAME, SessionRequest, render_script
from .slurm import SessionJob, cancel, list_sessions, submit

__all__ = ["JOB_NAME", "SessionJob", "SessionRequest", "cancel", "list_sessions", "render_script", "submit"]
