//! The groups of an aggregate with few of them, found by comparing each row's keys, packed
//! into four 64-bit words, with the few groups' packed keys: no hashing, and no string compared
//! byte by byte. A partition whose rows do not arrive grouped takes this way while its groups are
//! at most [`MAX_GROUPS`] and its keys fit; past that it goes to DataFusion's hash aggregate.
//!
//! DataFusion's hash aggregate hashes every row's keys and compares each with the group its
//! hash finds, column by column; TPC-H's Q1, grouping 6M rows by two one-character strings
//! into four groups, spent a fifth of its CPU there.
//!
//! A key is packed slot by slot into four 64-bit words, a slot per grouping column: a string
//! as its length (0xFF for NULL) in its low byte and its bytes above, in one word (up to 7
//! bytes) or two (up to 15); a value of up to 4 bytes as a validity bit above its bytes, in one
//! word; an 8-byte value as a validity word and the value. Unused bits are zero, so two rows'
//! packed keys are equal exactly when their keys are, NULLs equal to each other, as grouping
//! takes them.

use datafusion::arrow::array::{Array, ArrayRef, AsArray};
use datafusion::arrow::datatypes::DataType;

/// The most groups found this way: a row is compared with each of them in turn.
pub const MAX_GROUPS: usize = 16;

const KEY_WORDS: usize = 4;

/// One row's keys, packed.
type PackedKey = [u64; KEY_WORDS];

/// Where a grouping column's values go in a packed key, and how.
#[derive(Debug, Clone, Copy)]
enum Slot {
    /// A string of at most `8 * words - 1` bytes, in `words` (1 or 2) words from `word`.
    String { word: usize, words: usize },
    /// A value of `bytes` bytes (at most 4), with its validity bit, in word `word`.
    Narrow { word: usize, bytes: usize },
    /// An 8-byte value: its validity in word `word`, the value in the next.
    Wide { word: usize },
}

/// The groups found so far, by their packed keys in group order.
#[derive(Debug)]
pub struct FewGroups {
    slots: Vec<Slot>,
    groups: Vec<PackedKey>,
    /// The rows' packed keys of the batch being added, kept for its allocation.
    packed: Vec<PackedKey>,
}

impl FewGroups {
    /// For grouping columns of `types`, if they fit in a packed key: strings share the words
    /// the fixed-width values leave, one or two each.
    pub fn new(types: &[DataType]) -> Option<Self> {
        let fixed: Vec<Option<usize>> = types.iter().map(fixed_width).collect::<Option<_>>()?;
        let fixed_words: usize = fixed.iter().flatten().map(|&bytes| if bytes > 4 { 2 } else { 1 }).sum();
        let strings = fixed.iter().filter(|f| f.is_none()).count();
        let string_words = match strings {
            0 => 0,
            _ => (KEY_WORDS.checked_sub(fixed_words)? / strings).min(2),
        };
        if fixed_words > KEY_WORDS || (strings > 0 && string_words == 0) {
            return None;
        }
        let mut word = 0;
        let slots = fixed
            .iter()
            .map(|bytes| {
                let (slot, words) = match *bytes {
                    None => (Slot::String { word, words: string_words }, string_words),
                    Some(bytes) if bytes <= 4 => (Slot::Narrow { word, bytes }, 1),
                    Some(_) => (Slot::Wide { word }, 2),
                };
                word += words;
                slot
            })
            .collect();
        Some(FewGroups { slots, groups: Vec::new(), packed: Vec::new() })
    }

    pub fn len(&self) -> usize {
        self.groups.len()
    }

    /// Each row's group in `indices` (groups first seen here are numbered on from the ones
    /// before) and the rows that first showed a new group in `new_rows`. False, with nothing
    /// changed, where a key does not fit its slot or the groups would pass [`MAX_GROUPS`].
    pub fn find(&mut self, keys: &[ArrayRef], indices: &mut Vec<usize>, new_rows: &mut Vec<u32>) -> bool {
        let rows = keys.first().map_or(0, |k| k.len());
        self.packed.clear();
        self.packed.resize(rows, [0; KEY_WORDS]);
        for (slot, column) in self.slots.iter().zip(keys) {
            if !pack(*slot, column.as_ref(), &mut self.packed) {
                return false;
            }
        }
        let known = self.groups.len();
        indices.clear();
        new_rows.clear();
        for (row, key) in self.packed.iter().enumerate() {
            // Compared with every group, without a branch per group: which group a row falls
            // in is seldom predictable.
            let matches =
                self.groups.iter().enumerate().fold(0u32, |m, (g, group)| m | (u32::from(same(group, key)) << g));
            let group = match matches {
                0 if self.groups.len() == MAX_GROUPS => {
                    self.groups.truncate(known);
                    return false;
                }
                0 => {
                    self.groups.push(*key);
                    new_rows.push(row as u32);
                    self.groups.len() - 1
                }
                _ => matches.trailing_zeros() as usize,
            };
            indices.push(group);
        }
        true
    }
}

/// The bytes of a fixed-width key type's values, `None` for a string; no slot at all (the
/// outer `None`) for any other type.
fn fixed_width(data_type: &DataType) -> Option<Option<usize>> {
    match data_type {
        DataType::Utf8 => Some(None),
        DataType::Boolean => Some(Some(1)),
        t if t.is_integer() || matches!(t, DataType::Date32 | DataType::Date64) => Some(t.primitive_width()),
        _ => None,
    }
}

/// Whether two packed keys are equal, word by word without stopping at the first difference.
fn same(a: &PackedKey, b: &PackedKey) -> bool {
    a.iter().zip(b).fold(0, |difference, (x, y)| difference | (x ^ y)) == 0
}

/// The validity bit of a narrow value, above its four bytes.
const VALID: u64 = 1 << 32;

/// Packs `column`'s values into their slot of each row's key; false where a string is too long.
fn pack(slot: Slot, column: &dyn Array, packed: &mut [PackedKey]) -> bool {
    match slot {
        Slot::String { word, words: 1 } => {
            let strings = column.as_string::<i32>();
            let (offsets, bytes) = (strings.value_offsets(), strings.values().as_slice());
            for (row, key) in packed.iter_mut().enumerate() {
                let (start, length) = (offsets[row] as usize, (offsets[row + 1] - offsets[row]) as usize);
                key[word] = if strings.is_null(row) {
                    u8::MAX as u64
                } else if length < 8 {
                    (short_string_bits(bytes, start, length) << 8) | length as u64
                } else {
                    return false;
                };
            }
        }
        Slot::String { word, .. } => {
            let strings = column.as_string::<i32>();
            let (offsets, bytes) = (strings.value_offsets(), strings.values().as_slice());
            for (row, key) in packed.iter_mut().enumerate() {
                let (start, length) = (offsets[row] as usize, (offsets[row + 1] - offsets[row]) as usize);
                let packed_string = if strings.is_null(row) {
                    u8::MAX as u128
                } else if length < 16 {
                    (string_bits(bytes, start, length) << 8) | length as u128
                } else {
                    return false;
                };
                key[word] = packed_string as u64;
                key[word + 1] = (packed_string >> 64) as u64;
            }
        }
        Slot::Narrow { word, bytes } => {
            let valid = |row: usize| column.is_valid(row);
            if let Some(booleans) = column.as_boolean_opt() {
                for (row, key) in packed.iter_mut().enumerate() {
                    key[word] = if valid(row) { VALID | u64::from(booleans.value(row)) } else { 0 };
                }
                return true;
            }
            let data = column.to_data();
            let values = &data.buffers()[0].as_slice()[data.offset() * bytes..];
            let value: fn(&[u8]) -> u64 = match bytes {
                1 => |v| u64::from(v[0]),
                2 => |v| u64::from(u16::from_le_bytes([v[0], v[1]])),
                _ => |v| u64::from(u32::from_le_bytes([v[0], v[1], v[2], v[3]])),
            };
            for (row, (key, bytes)) in packed.iter_mut().zip(values.chunks_exact(bytes)).enumerate() {
                key[word] = if valid(row) { VALID | value(bytes) } else { 0 };
            }
        }
        Slot::Wide { word } => {
            let data = column.to_data();
            let values = &data.buffers()[0].as_slice()[data.offset() * 8..];
            for (row, (key, bytes)) in packed.iter_mut().zip(values.chunks_exact(8)).enumerate() {
                if column.is_valid(row) {
                    key[word] = 1;
                    key[word + 1] = u64::from_le_bytes(bytes.try_into().unwrap_or_default());
                }
            }
        }
    }
    true
}

/// The `length` (at most 15) bytes of `bytes` from `start`, little-endian, zero above: read 16
/// at once where the buffer has them, so that no row calls a copy of its own length.
fn string_bits(bytes: &[u8], start: usize, length: usize) -> u128 {
    let mask = (1u128 << (8 * length)) - 1;
    match bytes.get(start..start + 16) {
        Some(sixteen) => u128::from_le_bytes(sixteen.try_into().unwrap_or_default()) & mask,
        None => bytes_bits(&bytes[start..start + length]),
    }
}

/// As [`string_bits`], for at most 7 bytes, in a word.
fn short_string_bits(bytes: &[u8], start: usize, length: usize) -> u64 {
    let mask = (1u64 << (8 * length)) - 1;
    match bytes.get(start..start + 8) {
        Some(eight) => u64::from_le_bytes(eight.try_into().unwrap_or_default()) & mask,
        None => bytes_bits(&bytes[start..start + length]) as u64,
    }
}

/// `bytes` as a little-endian number, one by one.
fn bytes_bits(bytes: &[u8]) -> u128 {
    bytes.iter().rev().fold(0, |bits, &b| (bits << 8) | u128::from(b))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use datafusion::arrow::array::{BooleanArray, Date32Array, Int16Array, StringArray};

    use super::*;

    fn groups_of(found: &mut FewGroups, keys: &[ArrayRef]) -> Option<(Vec<usize>, Vec<u32>)> {
        let (mut indices, mut new_rows) = (Vec::new(), Vec::new());
        found.find(keys, &mut indices, &mut new_rows).then_some((indices, new_rows))
    }

    /// Rows get the same group exactly when their keys are equal, NULLs equal to each other,
    /// whatever the slices' offsets, against a comparison of the values themselves.
    #[test]
    fn rows_share_a_group_exactly_when_their_keys_are_equal() {
        let flags =
            StringArray::from(vec![Some("A"), Some("N"), None, Some(""), Some("A"), Some("NO"), None, Some("N")]);
        let numbers = Int16Array::from(vec![Some(1), Some(1), Some(1), None, Some(1), Some(-1), Some(1), Some(1)]);
        let booleans = BooleanArray::from(vec![
            Some(true),
            Some(true),
            Some(true),
            None,
            Some(true),
            Some(false),
            Some(true),
            Some(true),
        ]);
        let dates = Date32Array::from(vec![Some(0), None, Some(0), Some(0), Some(0), Some(0), Some(0), None]);
        for offset in 0..3 {
            let columns: Vec<ArrayRef> = vec![
                Arc::new(flags.slice(offset, 8 - offset)),
                Arc::new(numbers.slice(offset, 8 - offset)),
                Arc::new(booleans.slice(offset, 8 - offset)),
                Arc::new(dates.slice(offset, 8 - offset)),
            ];
            let types: Vec<DataType> = columns.iter().map(|c| c.data_type().clone()).collect();
            let mut found = FewGroups::new(&types).expect("three words of values leave one for the string");
            let (indices, new_rows) = groups_of(&mut found, &columns).unwrap();
            let value = |row: usize| -> Vec<String> {
                columns
                    .iter()
                    .map(|c| {
                        datafusion::arrow::util::display::array_value_to_string(c, row).unwrap()
                            + if c.is_null(row) { "∅" } else { "" }
                    })
                    .collect()
            };
            for i in 0..indices.len() {
                for j in 0..indices.len() {
                    assert_eq!(indices[i] == indices[j], value(i) == value(j), "rows {i} and {j} at offset {offset}");
                }
            }
            // Groups are numbered as first seen.
            let firsts: Vec<u32> =
                (0..found.len()).map(|g| indices.iter().position(|&i| i == g).unwrap() as u32).collect();
            assert_eq!(new_rows, firsts);
        }
    }

    /// A string near the end of its buffer is read byte by byte, elsewhere 8 or 16 bytes at
    /// once: in a word of its own (three strings share four words) or in two (one string).
    #[test]
    fn a_string_packs_alike_wherever_it_lies_in_its_buffer() {
        let strings: ArrayRef = Arc::new(StringArray::from(vec!["AB", "filler7", "filler7", "filler7", "AB"]));
        for columns in [1, 3] {
            let mut found = FewGroups::new(&vec![DataType::Utf8; columns]).unwrap();
            let (indices, _) = groups_of(&mut found, &vec![Arc::clone(&strings); columns]).unwrap();
            assert_eq!(indices, [0, 1, 1, 1, 0], "{columns} columns");
        }
    }

    #[test]
    fn a_key_past_its_slot_or_a_group_past_the_limit_changes_nothing() {
        let mut found = FewGroups::new(&[DataType::Utf8, DataType::Utf8]).unwrap();
        let two = |a: Vec<&str>, b: Vec<&str>| -> Vec<ArrayRef> {
            vec![Arc::new(StringArray::from(a)), Arc::new(StringArray::from(b))]
        };
        assert_eq!(groups_of(&mut found, &two(vec!["A", "R"], vec!["F", "F"])).unwrap(), (vec![0, 1], vec![0, 1]));
        // Two strings share four words: 15 bytes each at most.
        assert!(groups_of(&mut found, &two(vec!["A", "fifteen bytes 1"], vec!["F", "F"])).is_some());
        assert!(groups_of(&mut found, &two(vec!["A", "sixteen bytes 16"], vec!["F", "F"])).is_none());
        assert_eq!(found.len(), 3);
        let many: Vec<String> = (0..MAX_GROUPS).map(|i| format!("g{i}")).collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        assert!(groups_of(&mut found, &two(many.clone(), vec!["F"; MAX_GROUPS])).is_none());
        assert_eq!(found.len(), 3);
        let (indices, new_rows) = groups_of(&mut found, &two(vec!["R", "A", "N"], vec!["F", "F", "O"])).unwrap();
        assert_eq!((indices, new_rows), (vec![1, 0, 3], vec![2]));
    }

    #[test]
    fn only_keys_that_fit_are_packed() {
        assert!(FewGroups::new(&[DataType::Int64, DataType::Int64]).is_some());
        assert!(FewGroups::new(&[DataType::Int64, DataType::Int64, DataType::Int64]).is_none());
        assert!(FewGroups::new(&[DataType::Int64, DataType::Int32, DataType::Utf8]).is_some(), "7 bytes of string");
        let no_room = [DataType::Int64, DataType::Int64, DataType::Utf8];
        assert!(FewGroups::new(&no_room).is_none(), "no word left for the string");
        assert!(FewGroups::new(&[DataType::Float64]).is_none(), "NaN and -0.0 group apart from their bytes");
        assert!(FewGroups::new(&[DataType::LargeUtf8]).is_none());
        assert!(FewGroups::new(&[DataType::Int8, DataType::Utf8, DataType::Utf8, DataType::Utf8]).is_some());
        assert!(
            FewGroups::new(&[DataType::Int8, DataType::Utf8, DataType::Utf8, DataType::Utf8, DataType::Utf8]).is_none()
        );
    }
}
