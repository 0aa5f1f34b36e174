"""A streams group's topology and its validation against the topics that exist (Kafka's
StreamsTopology, InternalTopicManager.configureTopics): how many tasks each subtopology has, which
source topics are missing, which internal topics (repartition, changelog) are to be created and
with how many partitions, which co-partitioned topics disagree.

Tasks are (subtopology id, partition); a subtopology has as many tasks as its source topics have
partitions (they must agree); a repartition topic without a partition count takes that of the
subtopology writing into it, and a changelog topic has one partition per task of its subtopology.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

# A set of tasks as records and answers carry it: (subtopology id, sorted partitions), ids sorted.
TaskSet = tuple[tuple[str, tuple[int, ...]], ...]
Tasks = frozenset[tuple[str, int]]


@dataclass(frozen=True, slots=True)
class TopicInfo:
    name: str
    partitions: int = 0  # 0: derived from the topology
    replication_factor: int = 0
    configs: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class Subtopology:
    subtopology_id: str
    source_topics: tuple[str, ...] = ()
    source_topic_regex: tuple[str, ...] = ()
    state_changelog_topics: tuple[TopicInfo, ...] = ()
    repartition_sink_topics: tuple[str, ...] = ()
    repartition_source_topics: tuple[TopicInfo, ...] = ()
    # Indices into source_topics, source_topic_regex, repartition_source_topics.
    copartition_groups: tuple[tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]], ...] = ()


@dataclass(frozen=True, slots=True)
class ConfiguredTopology:
    """The outcome of validation: tasks per subtopology when every topic is there and agrees (ready)."""

    task_counts: Mapping[str, int]
    missing_source_topics: tuple[str, ...] = ()
    missing_internal_topics: tuple[TopicInfo, ...] = ()
    incorrectly_partitioned: tuple[str, ...] = ()

    @property
    def ready(self) -> bool:
        return not (self.missing_source_topics or self.missing_internal_topics or self.incorrectly_partitioned)

    def all_tasks(self) -> Tasks:
        return frozenset((s, p) for s, n in self.task_counts.items() for p in range(n))


def task_set(tasks: Tasks) -> TaskSet:
    by: dict[str, list[int]] = {}
    for s, p in tasks:
        by.setdefault(s, []).append(p)
    return tuple((s, tuple(sorted(ps))) for s, ps in sorted(by.items()))


def tasks_of(task_set_: TaskSet | None) -> Tasks:
    return frozenset((s, p) for s, ps in task_set_ or () for p in ps)


def configure(subtopologies: tuple[Subtopology, ...], partitions: Mapping[str, int]) -> ConfiguredTopology:
    """`partitions`: every existing topic's partition count."""
    missing_sources = sorted({t for s in subtopologies for t in s.source_topics if t not in partitions})
    if missing_sources:
        return ConfiguredTopology({}, missing_source_topics=tuple(missing_sources))
    # Repartition topics' partition counts, resolved to a fixed point: explicit, existing, else the
    # task count of the subtopology that writes into it.
    repartition: dict[str, int] = {}
    for s in subtopologies:
        for t in s.repartition_source_topics:
            if t.partitions > 0:
                repartition[t.name] = t.partitions
    counts: dict[str, int] = {}
    for _ in range(len(subtopologies) + 1):
        for s in subtopologies:
            sizes = [partitions[t] for t in s.source_topics]
            sizes += [repartition[t.name] for t in s.repartition_source_topics if t.name in repartition]
            if sizes:
                counts[s.subtopology_id] = max(sizes)
            for sink in s.repartition_sink_topics:
                if sink not in repartition and s.subtopology_id in counts:
                    repartition[sink] = counts[s.subtopology_id]
    wrong: set[str] = set()
    for s in subtopologies:
        for group in s.copartition_groups:
            names = [s.source_topics[i] for i in group[0] if i < len(s.source_topics)]
            names += [s.repartition_source_topics[i].name for i in group[2] if i < len(s.repartition_source_topics)]
            counted = {n: partitions.get(n, repartition.get(n, 0)) for n in names}
            if len(set(counted.values())) > 1:
                wrong.update(names)
    internal: list[TopicInfo] = []
    for s in subtopologies:
        for t in s.repartition_source_topics:
            want = repartition.get(t.name, 0)
            if t.name in partitions:
                if want and partitions[t.name] != want and t.partitions > 0:
                    wrong.add(t.name)
            elif want:
                internal.append(TopicInfo(t.name, want, t.replication_factor, t.configs))
        for t in s.state_changelog_topics:
            want = counts.get(s.subtopology_id, 0)
            if t.name in partitions:
                if partitions[t.name] != want:
                    wrong.add(t.name)
            elif want:
                internal.append(TopicInfo(t.name, want, t.replication_factor, t.configs))
    return ConfiguredTopology(counts, (), tuple(sorted(internal, key=lambda t: t.name)), tuple(sorted(wrong)))
