"""sectorflow.simulator."""
