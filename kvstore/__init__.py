"""sectorflow.kvstore."""
