"""sectorflow.producer."""
