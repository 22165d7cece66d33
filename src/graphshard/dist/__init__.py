"""Distributed runtime: process context and launch, collectives with failure reporting."""
