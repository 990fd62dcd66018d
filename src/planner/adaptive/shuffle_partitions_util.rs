//! Spark's `ShufflePartitionsUtil`: how the partitions of finished shuffle stages are grouped
//! (coalesced small partitions) and split (skewed partitions by map ranges), as pure functions
//! over the stages' sizes.

use crate::exec::aqe_shuffle_read::ShufflePartitionSpec;

/// `SMALL_PARTITION_FACTOR`: a split smaller than this share of the target is merged into its
/// neighbour.
const SMALL_PARTITION_FACTOR: f64 = 0.2;
/// `MERGED_PARTITION_FACTOR`: two neighbouring splits merge while together under this multiple
/// of the target.
const MERGED_PARTITION_FACTOR: f64 = 1.2;

/// Spark's `coalescePartitions`: new specs for shuffles that are read together (the same
/// operator's inputs, partition `i` of each in the same task), or `None` when coalescing
/// changes nothing or the shuffles disagree on their partition count.
///
/// `sizes[s]` are shuffle `s`'s bytes by partition; `input_specs[s]` its current specs where a
/// skew split already applies (then only the partitions outside skewed sections are coalesced).
/// The target size is `advisory` unless that leaves fewer than `min_partitions` partitions
/// (Spark: the default parallelism), and never below `min_partition_size`.
pub fn coalesce_partitions(
    sizes: &[Vec<u64>],
    input_specs: &[Option<Vec<ShufflePartitionSpec>>],
    advisory: u64,
    min_partitions: usize,
    min_partition_size: u64,
) -> Option<Vec<Vec<ShufflePartitionSpec>>> {
    if sizes.is_empty() {
        return None;
    }
    // Shuffles with different partition counts cannot be read partition by partition together.
    if sizes.iter().any(|s| s.len() != sizes[0].len()) {
        return None;
    }
    let total: u64 = sizes.iter().flatten().sum();
    // At least 16 bytes, so that an empty input still makes one partition.
    let max_target = total.div_ceil(min_partitions.max(1) as u64).max(16);
    let target = max_target.min(advisory).max(min_partition_size);
    if input_specs.iter().all(Option::is_none) {
        coalesce_without_skew(sizes, target)
    } else {
        coalesce_with_skew(sizes, input_specs, target)
    }
}

fn coalesce_without_skew(sizes: &[Vec<u64>], target: u64) -> Option<Vec<Vec<ShufflePartitionSpec>>> {
    let partitions = sizes[0].len();
    let specs = coalesce_range(0, partitions, sizes, target, false);
    (specs.len() < partitions).then(|| vec![specs; sizes.len()])
}

fn coalesce_with_skew(
    sizes: &[Vec<u64>],
    input_specs: &[Option<Vec<ShufflePartitionSpec>>],
    target: u64,
) -> Option<Vec<Vec<ShufflePartitionSpec>>> {
    let specs: Vec<&Vec<ShufflePartitionSpec>> = input_specs.iter().map(Option::as_ref).collect::<Option<_>>()?;
    // The partition each spec reads; every shuffle must read the same ones.
    let indices: Vec<Vec<usize>> = specs
        .iter()
        .map(|specs| {
            specs
                .iter()
                .map(|spec| match spec {
                    ShufflePartitionSpec::Coalesced(range) if range.len() == 1 => Some(range.start),
                    ShufflePartitionSpec::PartialReducer { partition, .. } => Some(*partition),
                    _ => None,
                })
                .collect::<Option<Vec<usize>>>()
        })
        .collect::<Option<_>>()?;
    let partition_indices = &indices[0];
    let partitions = sizes[0].len();
    if indices.iter().any(|i| i != partition_indices)
        || partition_indices.first() != Some(&0)
        || partition_indices.iter().any(|p| *p >= partitions)
    {
        return None;
    }
    let count = partition_indices.len();
    let mut new_specs: Vec<Vec<ShufflePartitionSpec>> = vec![Vec::new(); sizes.len()];
    let extend_coalesced = |new_specs: &mut Vec<Vec<ShufflePartitionSpec>>, start: usize, end: usize| {
        let coalesced = coalesce_range(start, end, sizes, target, true);
        new_specs.iter_mut().for_each(|specs| specs.extend(coalesced.iter().cloned()));
    };
    let (mut i, mut start) = (1, 0);
    while i < count {
        if partition_indices[i - 1] == partition_indices[i] {
            // A skewed section starts at i - 1: coalesce what lies before it, keep it as it is.
            let repeated = partition_indices[i];
            if i - 1 > start {
                extend_coalesced(&mut new_specs, partition_indices[start], repeated);
            }
            let mut end = i + 1;
            while end < count && partition_indices[end] == repeated {
                end += 1;
            }
            for (new, old) in new_specs.iter_mut().zip(&specs) {
                new.extend(old[i - 1..end].iter().cloned());
            }
            start = end;
            i = end;
        } else if partition_indices[i - 1] + 1 != partition_indices[i] {
            return None;
        } else {
            i += 1;
        }
    }
    if count > start {
        extend_coalesced(&mut new_specs, partition_indices[start], partition_indices[count - 1] + 1);
    }
    (new_specs[0].len() < count).then_some(new_specs)
}

/// Packs partitions `start..end` of every shuffle into consecutive groups, a new group starting
/// where adding the next partition would pass `target`. Empty groups are skipped (no task for
/// nothing) unless every partition is empty and `allow_empty` is off.
fn coalesce_range(
    start: usize,
    end: usize,
    sizes: &[Vec<u64>],
    target: u64,
    allow_empty: bool,
) -> Vec<ShufflePartitionSpec> {
    let mut specs = Vec::new();
    let (mut coalesced, mut split_at) = (0u64, start);
    for i in start..end {
        let size: u64 = sizes.iter().map(|s| s[i]).sum();
        if i > split_at && coalesced + size > target {
            if coalesced > 0 {
                specs.push(ShufflePartitionSpec::Coalesced(split_at..i));
            }
            split_at = i;
            coalesced = size;
        } else {
            coalesced += size;
        }
    }
    if coalesced > 0 || (!allow_empty && specs.is_empty()) {
        specs.push(ShufflePartitionSpec::Coalesced(split_at..end));
    }
    specs
}

/// Spark's `splitSizeListByTargetSize`: where to cut `sizes` so that each piece is close to
/// `target`, small pieces merged into their neighbours. Each index starts a piece.
pub fn split_size_list_by_target_size(sizes: &[u64], target: u64) -> Vec<usize> {
    let target_f = target as f64;
    let mut starts = vec![0];
    let (mut current, mut last) = (0u64, None::<u64>);
    let try_merge = |starts: &mut Vec<usize>, current: u64, last: &mut Option<u64>| {
        let merge = last.is_some_and(|last| {
            ((current + last) as f64) < target_f * MERGED_PARTITION_FACTOR
                || (current as f64) < target_f * SMALL_PARTITION_FACTOR
                || (last as f64) < target_f * SMALL_PARTITION_FACTOR
        });
        if merge {
            starts.pop();
            *last = last.map(|l| l + current);
        } else {
            *last = Some(current);
        }
    };
    for (i, &size) in sizes.iter().enumerate() {
        if i > 0 && current + size > target {
            try_merge(&mut starts, current, &mut last);
            starts.push(i);
            current = size;
        } else {
            current += size;
        }
    }
    try_merge(&mut starts, current, &mut last);
    starts
}

/// Spark's `createSkewPartitionSpecs`: partition `partition` split by ranges of map tasks into
/// pieces of about `target` bytes (`map_sizes[m]`: what map task `m` wrote to it), or `None`
/// when it cannot be split.
pub fn skew_partition_specs(partition: usize, map_sizes: &[u64], target: u64) -> Option<Vec<ShufflePartitionSpec>> {
    let starts = split_size_list_by_target_size(map_sizes, target);
    if starts.len() < 2 {
        return None;
    }
    let ends = starts.iter().skip(1).copied().chain(std::iter::once(map_sizes.len()));
    Some(
        starts
            .iter()
            .zip(ends)
            .map(|(&start, end)| ShufflePartitionSpec::PartialReducer { partition, maps: start..end })
            .collect(),
    )
}

/// `OptimizeShuffleWithLocalRead.getPartitionSpecs`: each map task's output read where it is,
/// in about `parallelism` tasks — a map task's partitions cut into equal ranges when there are
/// more tasks than map tasks, else ranges of whole map tasks.
pub fn local_read_specs(maps: usize, partitions: usize, parallelism: usize) -> Vec<ShufflePartitionSpec> {
    if maps == 0 {
        return Vec::new();
    }
    if parallelism >= maps {
        let starts = equally_divide(partitions, (parallelism / maps).max(1));
        (0..maps)
            .flat_map(|map| {
                ranges(&starts, partitions)
                    .map(move |partitions| ShufflePartitionSpec::PartialMapper { map, partitions })
            })
            .collect()
    } else {
        ranges(&equally_divide(maps, parallelism.max(1)), maps).map(ShufflePartitionSpec::CoalescedMapper).collect()
    }
}

/// Consecutive ranges from their starts up to `end`.
fn ranges(starts: &[usize], end: usize) -> impl Iterator<Item = std::ops::Range<usize>> + '_ {
    starts.iter().enumerate().map(move |(i, &start)| start..starts.get(i + 1).copied().unwrap_or(end))
}

/// The starts of `buckets` near-equal buckets of `elements`, the first `elements % buckets`
/// one larger (Spark's `equallyDivide`).
fn equally_divide(elements: usize, buckets: usize) -> Vec<usize> {
    let (per_bucket, remaining) = (elements / buckets, elements % buckets);
    let split_point = (per_bucket + 1) * remaining;
    (0..remaining)
        .map(|i| i * (per_bucket + 1))
        .chain((remaining..buckets).map(|i| split_point + (i - remaining) * per_bucket))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ShufflePartitionSpec::{Coalesced, PartialReducer};

    const MIB: u64 = 1 << 20;

    #[test]
    fn coalesces_shuffles_read_together_as_spark_documents() {
        // The example of Spark's `coalescePartitions` doc: target 128 MiB.
        let sizes = vec![
            vec![100 * MIB, 20 * MIB, 100 * MIB, 10 * MIB, 30 * MIB],
            vec![10 * MIB, 10 * MIB, 70 * MIB, 5 * MIB, 5 * MIB],
        ];
        let specs = coalesce_partitions(&sizes, &[None, None], 128 * MIB, 1, 0).unwrap();
        let expected = vec![Coalesced(0..1), Coalesced(1..2), Coalesced(2..3), Coalesced(3..5)];
        assert_eq!(specs, vec![expected.clone(), expected]);
    }

    #[test]
    fn empty_partitions_get_no_task_and_an_empty_input_one() {
        let specs = coalesce_partitions(&[vec![0, 10, 0, 0, 20, 0]], &[None], 100, 1, 0).unwrap();
        assert_eq!(specs, vec![vec![Coalesced(0..6)]]);
        let specs = coalesce_partitions(&[vec![0, 0, 0]], &[None], 100, 1, 0).unwrap();
        assert_eq!(specs, vec![vec![Coalesced(0..3)]]);
        // A large partition ends the group before it; the empty ones after it add nothing.
        let specs = coalesce_partitions(&[vec![60, 0, 60, 0]], &[None], 100, 1, 0).unwrap();
        assert_eq!(specs, vec![vec![Coalesced(0..2), Coalesced(2..4)]]);
    }

    #[test]
    fn parallelism_bounds_the_target_and_min_size_bounds_it_again() {
        let sizes = vec![vec![10 * MIB; 8]];
        // 80 MiB over 2 cores: 40 MiB a partition, not the 64 MiB advised.
        let specs = coalesce_partitions(&sizes, &[None], 64 * MIB, 2, MIB).unwrap();
        assert_eq!(specs[0], vec![Coalesced(0..4), Coalesced(4..8)]);
        // Small data and many cores: the minimum partition size wins.
        let sizes = vec![vec![MIB / 4; 8]];
        let specs = coalesce_partitions(&sizes, &[None], 64 * MIB, 200, MIB).unwrap();
        assert_eq!(specs[0], vec![Coalesced(0..4), Coalesced(4..8)]);
    }

    #[test]
    fn nothing_changes_when_nothing_coalesces_or_counts_differ() {
        assert_eq!(coalesce_partitions(&[vec![100, 100]], &[None], 100, 1, 0), None);
        assert_eq!(coalesce_partitions(&[vec![1, 1], vec![1, 1, 1]], &[None, None], 100, 1, 0), None);
    }

    #[test]
    fn skewed_sections_are_kept_and_the_rest_coalesced() {
        // Partition 2 of the left shuffle was split in two; the right side reads it twice.
        let left = vec![
            Coalesced(0..1),
            Coalesced(1..2),
            PartialReducer { partition: 2, maps: 0..1 },
            PartialReducer { partition: 2, maps: 1..2 },
            Coalesced(3..4),
            Coalesced(4..5),
        ];
        let right =
            vec![Coalesced(0..1), Coalesced(1..2), Coalesced(2..3), Coalesced(2..3), Coalesced(3..4), Coalesced(4..5)];
        let sizes = vec![vec![10, 10, 500, 10, 10], vec![10, 10, 10, 10, 10]];
        let specs = coalesce_partitions(&sizes, &[Some(left), Some(right)], 100, 1, 0).unwrap();
        assert_eq!(
            specs[0],
            vec![
                Coalesced(0..2),
                PartialReducer { partition: 2, maps: 0..1 },
                PartialReducer { partition: 2, maps: 1..2 },
                Coalesced(3..5)
            ]
        );
        assert_eq!(specs[1], vec![Coalesced(0..2), Coalesced(2..3), Coalesced(2..3), Coalesced(3..5)]);
    }

    #[test]
    fn split_points_merge_small_pieces() {
        assert_eq!(split_size_list_by_target_size(&[100, 100, 100, 100], 100), vec![0, 1, 2, 3]);
        // Pieces under 20% of the target join their neighbour.
        assert_eq!(split_size_list_by_target_size(&[100, 10, 100], 100), vec![0, 2]);
        assert_eq!(split_size_list_by_target_size(&[100, 15], 100), vec![0]);
    }

    #[test]
    fn a_skewed_partition_splits_by_map_ranges() {
        let specs = skew_partition_specs(7, &[100, 100, 100], 100).unwrap();
        assert_eq!(
            specs,
            vec![
                PartialReducer { partition: 7, maps: 0..1 },
                PartialReducer { partition: 7, maps: 1..2 },
                PartialReducer { partition: 7, maps: 2..3 }
            ]
        );
        // One map task wrote all of it: nothing to split.
        assert_eq!(skew_partition_specs(7, &[300], 100), None);
    }

    #[test]
    fn local_reads_cover_every_map_output_once() {
        use ShufflePartitionSpec::{CoalescedMapper, PartialMapper};
        assert_eq!(
            local_read_specs(2, 5, 4),
            vec![
                PartialMapper { map: 0, partitions: 0..3 },
                PartialMapper { map: 0, partitions: 3..5 },
                PartialMapper { map: 1, partitions: 0..3 },
                PartialMapper { map: 1, partitions: 3..5 }
            ]
        );
        assert_eq!(local_read_specs(5, 200, 2), vec![CoalescedMapper(0..3), CoalescedMapper(3..5)]);
        assert_eq!(equally_divide(10, 3), vec![0, 4, 7]);
    }
}
