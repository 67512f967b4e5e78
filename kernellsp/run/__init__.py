"""Stage 3, running one entry on a GPU: runners (local, ssh) and the generated harness that builds,
fills, launches and reads back an entry on kernellsp's terms."""
