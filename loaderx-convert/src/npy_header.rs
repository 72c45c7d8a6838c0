//! A guard in front of `ndarray-npy`'s `.npy` header parser, shared by the
//! `.npy`/`.npz` converter and the WebDataset converter's `.npy` members.
//!
//! The header is a Python literal, which the parser reads with a
//! backtracking grammar whose time grows about threefold with every
//! unclosed bracket: 169 bytes opening twelve `{` took 34 s, sixteen more
//! than a minute (found by the `npy` fuzz target). A plain array's header
//! nests two deep (`{… 'shape': (2, 3)}`), a structured dtype's a few more
//! (`[('a', '<i4', (2,))]`), so a header nesting deeper than
//! [`MAX_NESTING`] is refused before the parser sees it.

/// The deepest bracket nesting a header may have: room for every dtype
/// NumPy writes for the arrays that convert, and for structured dtypes
/// (refused later by name, not by this guard) of a field holding a
/// sub-array.
pub(crate) const MAX_NESTING: usize = 5;

/// Checks the bracket nesting of the header of the `.npy` file starting
/// at `file` (its magic string, version, length and header text; what
/// follows the header is not read). Brackets inside quoted strings do not
/// count. A file too short or malformed to hold a header passes: the
/// parser refuses it.
///
/// # Errors
///
/// A sentence when some bracket opens deeper than [`MAX_NESTING`].
pub(crate) fn check_nesting(file: &[u8]) -> Result<(), String> {
    let (start, len): (usize, _) = match file.get(6) {
        Some(1) => (
            10,
            file.get(8..10)
                .map(|b| usize::from(u16::from_le_bytes([b[0], b[1]]))),
        ),
        Some(2 | 3) => (
            12,
            file.get(8..12)
                .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize),
        ),
        _ => return Ok(()),
    };
    let Some(len) = len else {
        return Ok(());
    };
    let end = file.len().min(start.saturating_add(len));
    check_text(file.get(start..end).unwrap_or_default())
}

/// [`check_nesting`] on the header's text alone.
fn check_text(header: &[u8]) -> Result<(), String> {
    let mut depth = 0usize;
    let mut quote: Option<u8> = None;
    for &b in header {
        match (quote, b) {
            (Some(q), _) if b == q => quote = None,
            (Some(_), _) => {}
            (None, b'\'' | b'"') => quote = Some(b),
            (None, b'(' | b'[' | b'{') => {
                depth += 1;
                if depth > MAX_NESTING {
                    return Err(format!(
                        "its header nests brackets deeper than {MAX_NESTING} levels, \
                         more than any array NumPy writes"
                    ));
                }
            }
            (None, b')' | b']' | b'}') => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_numpy_writes_pass() {
        for h in [
            "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }",
            "{'descr': '|u1', 'fortran_order': True, 'shape': (), }",
            "{'descr': [('a', '<i4', (2, 3)), ('b', '<f8')], 'fortran_order': False, 'shape': (5,), }",
            "{'descr': '<i8', 'fortran_order': False, 'shape': (5,), 'x': '((((((((('}",
        ] {
            assert_eq!(check_text(h.as_bytes()), Ok(()), "{h}");
            // As a file: version 1 and 2 preambles, data full of brackets
            // after the header (never read).
            let mut v1 = b"\x93NUMPY\x01\x00".to_vec();
            v1.extend_from_slice(&(h.len() as u16).to_le_bytes());
            v1.extend_from_slice(h.as_bytes());
            v1.extend_from_slice(&[b'('; 64]);
            assert_eq!(check_nesting(&v1), Ok(()), "{h}");
            let mut v2 = b"\x93NUMPY\x02\x00".to_vec();
            v2.extend_from_slice(&(h.len() as u32).to_le_bytes());
            v2.extend_from_slice(h.as_bytes());
            v2.extend_from_slice(&[b'{'; 64]);
            assert_eq!(check_nesting(&v2), Ok(()), "{h}");
        }
    }

    #[test]
    fn deeply_nested_headers_are_refused() {
        let h = format!("{}'descr': '<i8', 'shape': (5,), }}", "{".repeat(12));
        let e = check_text(h.as_bytes()).unwrap_err();
        assert!(e.contains("deeper than 5"), "{e}");
        // A length whose low byte is a newline does not end the check.
        let mut file = b"\x93NUMPY\x01\x00".to_vec();
        let text = format!("{h}{}", " ".repeat(266 - h.len()));
        file.extend_from_slice(&266u16.to_le_bytes());
        file.extend_from_slice(text.as_bytes());
        assert!(check_nesting(&file).is_err());
        assert!(check_text(b"{((((((").is_err());
    }
}
