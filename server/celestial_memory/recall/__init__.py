"""Hybrid recall: keyword vectors, candidates from the zones in Core-to-Cloud order, and the
fusion of dense, keyword and entity relevance (docs/design.md, "Recall")."""
