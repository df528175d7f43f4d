"""Reading a /metrics scrape in tests, with prometheus_client's own parser."""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families


@dataclass(frozen=True)
class Scrape:
    """Samples by (sample name, labels); families by name with their type and help."""
    samples: dict[tuple[str, frozenset], float]
    families: dict[str, tuple[str, str]]

    @classmethod
    def parse(cls, text: str) -> "Scrape":
        samples, families = {}, {}
        for family in text_string_to_metric_families(text):
            families[family.name] = (family.type, family.documentation)
            for sample in family.samples:
                samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
        return cls(samples, families)

    @property
    def names(self) -> set[str]:
        return {name for name, _ in self.samples}

    def value(self, name: str, **labels) -> float | None:
        """The one sample of ``name`` whose labels include ``labels`` (None if there is none)."""
        wanted = set((k, str(v)) for k, v in labels.items())
        found = [v for (n, have), v in self.samples.items() if n == name and wanted <= have]
        assert len(found) <= 1, f"{len(found)} samples of {name} match {labels}"
        return found[0] if found else None

    def having(self, name: str, **labels) -> list[dict[str, str]]:
        """Label sets of every sample of ``name`` whose labels include ``labels``."""
        wanted = set((k, str(v)) for k, v in labels.items())
        return [dict(have) for (n, have) in self.samples if n == name and wanted <= have]
