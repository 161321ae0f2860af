"""Gradio UI: lays out pages and wires events to application services; no business logic."""
