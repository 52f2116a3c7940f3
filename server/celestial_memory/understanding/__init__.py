"""Model-backed understanding: what an OpenAI-compatible chat model adds to stored memories,
always after the Store has answered (docs/design.md, "Understanding with a model")."""
