"""Proposers of candidate rewrites: the built-in tuner and an OpenAI-compatible LLM."""

from kernellsp.optimize.propose.base import Candidate, ProposalContext, Proposer, ProposerError, splice_kernel

__all__ = ["Candidate", "ProposalContext", "Proposer", "ProposerError", "splice_kernel"]
