//! Least-significant-digit radix sort of packed rows: each row is one integer, its packed keys
//! above its position, so sorting by the key bits alone orders the positions, ties in arrival
//! order. Spark sorts its key prefixes the same way (`RadixSort`, eight bits a pass).

/// A row packed as keys above position: `u64` when both fit, else `u128`.
pub(super) trait Packed: Copy + Default + Send + 'static {
    fn new(keys: u64, position: u64, position_bits: u32) -> Self;
    /// The eight bits starting at `shift`.
    fn byte(self, shift: u32) -> usize;
    /// The low `position_bits` bits.
    fn position(self, position_bits: u32) -> u64;
}

impl Packed for u64 {
    fn new(keys: u64, position: u64, position_bits: u32) -> Self {
        keys.checked_shl(position_bits).unwrap_or(0) | position
    }

    fn byte(self, shift: u32) -> usize {
        (self.checked_shr(shift).unwrap_or(0) & 0xff) as usize
    }

    fn position(self, position_bits: u32) -> u64 {
        self & low_bits(position_bits)
    }
}

impl Packed for u128 {
    fn new(keys: u64, position: u64, position_bits: u32) -> Self {
        (u128::from(keys) << position_bits) | u128::from(position)
    }

    fn byte(self, shift: u32) -> usize {
        (self.checked_shr(shift).unwrap_or(0) & 0xff) as usize
    }

    fn position(self, position_bits: u32) -> u64 {
        (self as u64) & low_bits(position_bits)
    }
}

pub(super) fn low_bits(bits: u32) -> u64 {
    1u64.checked_shl(bits).map_or(u64::MAX, |b| b - 1)
}

/// Sorts `rows` by their bits `from..from + bits`, stably. A byte every row shares costs no
/// pass.
pub(super) fn sort<T: Packed>(rows: &mut Vec<T>, from: u32, bits: u32) {
    let digits = bits.div_ceil(8) as usize;
    let mut counts = vec![[0usize; 256]; digits];
    for row in rows.iter() {
        for (digit, count) in counts.iter_mut().enumerate() {
            count[row.byte(from + 8 * digit as u32)] += 1;
        }
    }
    let mut scratch = vec![T::default(); rows.len()];
    for (digit, count) in counts.iter().enumerate() {
        if count.contains(&rows.len()) {
            continue;
        }
        let mut next = [0usize; 256];
        let mut total = 0;
        for (slot, count) in next.iter_mut().zip(count) {
            *slot = total;
            total += count;
        }
        let shift = from + 8 * digit as u32;
        for row in rows.iter() {
            let slot = &mut next[row.byte(shift)];
            scratch[*slot] = *row;
            *slot += 1;
        }
        std::mem::swap(rows, &mut scratch);
    }
}
