"""File primitives every layer shares: where the checkout's folders are, atomic writes, bounded JSON reads,
staging folders. They know nothing of results, reports or workers."""
