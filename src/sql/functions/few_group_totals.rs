//! The totals of a batch of DECIMAL values for few groups (a TPC-H Q1 has four), as `sum` and
//! `avg` take them. Adding each row straight into its group's total makes a row wait for the
//! row before it to have stored its total, which, among few groups, is most often the same one:
//! the adds then run one at a time. Here four lanes of rows keep totals of their own, and a
//! group's total is their sum, exact in 256 bits.

use datafusion::arrow::datatypes::i256;

/// The most groups [`few_group_totals`] takes.
pub(super) const FEW_GROUPS: usize = 16;

const LANES: usize = 4;

/// Each group's total and number of rows.
pub(super) struct FewGroupTotals {
    pub(super) totals: [i256; FEW_GROUPS],
    pub(super) rows: [i64; FEW_GROUPS],
}

/// The totals of `values`, none NULL, by `groups`, each below [`FEW_GROUPS`].
pub(super) fn few_group_totals(values: &[i128], groups: &[usize]) -> FewGroupTotals {
    let mut totals = [[i256::ZERO; FEW_GROUPS]; LANES];
    let mut rows = [[0i64; FEW_GROUPS]; LANES];
    let (group_chunks, value_chunks) = (groups.chunks_exact(LANES), values.chunks_exact(LANES));
    let tail = group_chunks.remainder().iter().zip(value_chunks.remainder());
    for (groups, values) in group_chunks.zip(value_chunks) {
        for lane in 0..LANES {
            let group = groups[lane];
            totals[lane][group] = totals[lane][group].wrapping_add(i256::from_i128(values[lane]));
            rows[lane][group] += 1;
        }
    }
    for (&group, &value) in tail {
        totals[0][group] = totals[0][group].wrapping_add(i256::from_i128(value));
        rows[0][group] += 1;
    }
    let mut few = FewGroupTotals { totals: [i256::ZERO; FEW_GROUPS], rows: [0; FEW_GROUPS] };
    for lane in 0..LANES {
        for group in 0..FEW_GROUPS {
            few.totals[group] = few.totals[group].wrapping_add(totals[lane][group]);
            few.rows[group] += rows[lane][group];
        }
    }
    few
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_group_totals_its_rows_whatever_the_lane() {
        // Lengths around the lanes' width, values at 128 bits' ends, so that a total past 128
        // bits shows it is kept exact.
        for len in [0, 1, 3, 4, 5, 9, 1000] {
            let groups: Vec<usize> = (0..len).map(|row| (row * 7 + row / 3) % FEW_GROUPS).collect();
            let values: Vec<i128> = (0..len)
                .map(|row| if row % 5 == 0 { i128::MAX - row as i128 } else { -(row as i128) * 1_000 })
                .collect();
            let few = few_group_totals(&values, &groups);
            for group in 0..FEW_GROUPS {
                let rows: Vec<usize> = (0..len).filter(|&row| groups[row] == group).collect();
                let expected = rows.iter().fold(i256::ZERO, |total, &row| total + i256::from_i128(values[row]));
                assert_eq!(few.totals[group], expected, "group {group} of {len} rows");
                assert_eq!(few.rows[group], rows.len() as i64, "group {group} of {len} rows");
            }
        }
    }
}
