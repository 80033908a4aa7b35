"""Reading a /metrics endpoint in the tests: one scrape as {(name, labels): value}."""

import urllib.request

from prometheus_client.parser import text_string_to_metric_families


def scrape(url: str, token: str | None = None) -> dict:
    """Every sample at `url`: {(sample name, ((label, value), ...) sorted): value}; {} if unreachable."""
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            text = response.read().decode()
    except OSError:
        return {}
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def only(samples: dict, name: str, **labels) -> dict:
    """The samples called `name` whose labels include `labels`: {other labels: value}."""
    found = {}
    for (sample, sample_labels), value in samples.items():
        given = dict(sample_labels)
        if sample == name and all(given.get(key) == value_ for key, value_ in labels.items()):
            found[tuple((key, v) for key, v in sample_labels if key not in labels)] = value
    return found
