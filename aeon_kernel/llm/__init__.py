"""The kernel's side of the model: the retrying client, cassettes, prompts, and parsing model output into data."""
