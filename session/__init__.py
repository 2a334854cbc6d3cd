"""Streaming sessions: the NodeGroups of a beamline as a Slurm job (render, submit, list, cancel)."""

from .script import JOB_NAME, SessionRequest, render_script
from .slurm import SessionJob, cancel, list_sessions, submit

__all__ = ["JOB_NAME", "SessionJob", "SessionRequest", "cancel", "list_sessions", "render_script", "submit"]
