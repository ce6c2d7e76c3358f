//! Output that an agent merges from two pipes (stdout and stderr read as they arrive): the
//! order in which the two streams' lines interleave depends on timing, in the agent itself as
//! in a replay. [`two_streams`] tells whether two texts can be the same two streams merged in
//! another order.

use std::collections::HashMap;

/// Whether `b` holds exactly the lines of `a`, in an order that merging the same two ordered
/// streams differently gives: `b`'s lines, mapped to their occurrences in `a` (the k-th equal
/// line to the k-th), split into two sequences each in `a`'s order — that is, no three of them
/// appear in reverse order. A reordering within one stream (three lines reversed) is not.
pub fn two_streams(a: &str, b: &str) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut at: HashMap<&str, Vec<usize>> = HashMap::new();
    let la: Vec<&str> = a.split('\n').collect();
    for (i, l) in la.iter().enumerate().rev() {
        at.entry(l).or_default().push(i);
    }
    // Each line of `b` takes the next unused occurrence in `a` (stacks hold them in reverse).
    let mut highest = None::<usize>;
    let mut second = None::<usize>;
    let mut n = 0;
    for l in b.split('\n') {
        n += 1;
        let Some(x) = at.get_mut(l).and_then(Vec::pop) else {
            return false;
        };
        // A decreasing run of three: `x` below a value that was itself below an earlier one.
        if second.is_some_and(|s| x < s) {
            return false;
        }
        if highest.is_some_and(|h| x < h) {
            second = Some(second.map_or(x, |s| s.max(x)));
        }
        highest = Some(highest.map_or(x, |h| h.max(x)));
    }
    n == la.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_merged_in_another_order_are_the_same() {
        assert!(two_streams("a\nb\nc", "a\nb\nc"));
        // stderr's line came before stdout's, or after it.
        assert!(two_streams(
            "status=1\ncat: a.txt: No such file or directory",
            "cat: a.txt: No such file or directory\nstatus=1"
        ));
        assert!(two_streams("o1\ne1\no2\ne2\n", "e1\ne2\no1\no2\n"));
        // Equal lines keep their order.
        assert!(two_streams("x\ny\nx\n", "x\nx\ny\n"));
    }

    #[test]
    fn other_differences_are_not() {
        // Three lines reversed cannot come from two ordered streams.
        assert!(!two_streams("1\n2\n3", "3\n2\n1"));
        assert!(!two_streams("a\nb", "a\nc"));
        assert!(!two_streams("a\nb", "a\nb\nb"));
        assert!(!two_streams("a\nb\n", "a\nb"));
        assert!(!two_streams("ab\n", "ba\n"));
    }
}
