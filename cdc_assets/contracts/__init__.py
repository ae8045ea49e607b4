"""The Spark schemas every layer writes, and the pandera checks of them."""
