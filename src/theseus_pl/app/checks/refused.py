"""How a run is refused: one message listing every problem, said before anything is trained or logged."""

from __future__ import annotations


class RunRefused(ValueError):
    """Every problem found with a run, each naming the option or file and the fix; nothing was started."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__(
            "The run cannot start (nothing was trained or logged):\n" + "\n".join(f"- {p}" for p in problems)
        )
