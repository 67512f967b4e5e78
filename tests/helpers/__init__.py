"""Helpers shared by the test modules (no tests here): language-server sessions, the GPU's name, a scripted
OpenAI-compatible server."""
