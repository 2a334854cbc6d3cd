"""sectorflow.consumer."""
