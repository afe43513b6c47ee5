"""The reports: statistics, comparison, health and their renderers (`bench report`, `compare`, `health`)."""
