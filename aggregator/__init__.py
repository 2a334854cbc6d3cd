"""sectorflow.aggregator."""
