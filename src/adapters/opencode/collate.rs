//! `String.prototype.localeCompare` with the root locale (ICU), as OpenCode sorts directory
//! entries: punctuation and symbols first (in CLDR root order), then digits, then letters;
//! letters compare case-insensitively and without accents first, lowercase before
//! uppercase only to break ties. Digits are not compared as numbers (`f10` < `f2`).
//!
//! This covers the characters of file names; scripts beyond Latin compare by code point
//! after the Latin letters (a documented approximation).

use std::cmp::Ordering;

/// CLDR root order of the ASCII punctuation and symbols.
const PUNCT: &str = "_-,;:!?.'\"()[]{}@*/\\&#%`^+<=>|~$";

/// (group, primary weight, tertiary weight) of one character.
fn weights(c: char) -> (u8, u32, u8) {
    if c.is_whitespace() {
        return (0, c as u32, 0);
    }
    if let Some(i) = PUNCT.find(c) {
        return (1, i as u32, 0);
    }
    if c.is_ascii_digit() {
        return (3, c as u32, 0);
    }
    if c.is_alphabetic() {
        let base = fold(c);
        let tertiary = u8::from(c.is_uppercase());
        return if base.is_ascii_alphabetic() {
            (4, base as u32, tertiary)
        } else {
            (5, base as u32, tertiary)
        };
    }
    if c.is_ascii() {
        return (1, 100 + c as u32, 0);
    }
    // Other symbols after the ASCII ones, before digits.
    (2, c as u32, 0)
}

/// The lowercase base letter of a Latin letter with a diacritic (`É` → `e`).
fn fold(c: char) -> char {
    let l = c.to_lowercase().next().unwrap_or(c);
    match l {
        'à' | 'á' | 'â' | 'ã' | 'ä' | 'å' | 'ā' => 'a',
        'ç' | 'ć' | 'č' => 'c',
        'è' | 'é' | 'ê' | 'ë' | 'ē' | 'ę' | 'ě' => 'e',
        'ì' | 'í' | 'î' | 'ï' | 'ī' => 'i',
        'ñ' | 'ń' | 'ň' => 'n',
        'ò' | 'ó' | 'ô' | 'õ' | 'ö' | 'ø' | 'ō' => 'o',
        'ù' | 'ú' | 'û' | 'ü' | 'ū' | 'ů' => 'u',
        'ý' | 'ÿ' => 'y',
        'š' | 'ś' => 's',
        'ž' | 'ź' | 'ż' => 'z',
        x => x,
    }
}

/// Compare two strings the way `a.localeCompare(b)` does for file names.
pub fn compare(a: &str, b: &str) -> Ordering {
    let primary = |s: &str| -> Vec<(u8, u32)> {
        s.chars()
            .map(|c| {
                let (g, p, _) = weights(c);
                (g, p)
            })
            .collect()
    };
    primary(a)
        .cmp(&primary(b))
        .then_with(|| {
            // Accents: an unaccented letter first.
            let acc = |s: &str| -> Vec<bool> {
                s.chars()
                    .map(|c| {
                        let l = c.to_lowercase().next().unwrap_or(c);
                        fold(c) != l
                    })
                    .collect()
            };
            acc(a).cmp(&acc(b))
        })
        .then_with(|| {
            let t = |s: &str| -> Vec<u8> { s.chars().map(|c| weights(c).2).collect() };
            t(a).cmp(&t(b))
        })
        .then_with(|| a.cmp(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sorted(v: &[&str]) -> Vec<String> {
        let mut v: Vec<String> = v.iter().map(|s| s.to_string()).collect();
        v.sort_by(|a, b| compare(a, b));
        v
    }

    #[test]
    fn root_collation_of_file_names() {
        assert_eq!(
            sorted(&["f2.txt", "f10.txt", "f1.txt", "f100.txt"]),
            ["f1.txt", "f10.txt", "f100.txt", "f2.txt"]
        );
        assert_eq!(sorted(&["b", "B", "a", "A"]), ["a", "A", "b", "B"]);
        assert_eq!(
            sorted(&[
                "sub/",
                "notes.txt",
                "bin.dat",
                "opencode.json",
                "_x",
                ".hidden"
            ]),
            [
                "_x",
                ".hidden",
                "bin.dat",
                "notes.txt",
                "opencode.json",
                "sub/"
            ]
        );
        assert_eq!(sorted(&["é", "f", "e"]), ["e", "é", "f"]);
    }
}
