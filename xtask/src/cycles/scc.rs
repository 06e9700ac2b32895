//! Strongly connected components (Tarjan's algorithm): the groups of files that all reach each
//! other through imports. A component of one file is no cycle (a file naming its own items makes
//! no arrow), so only components of two or more are returned.

/// The components of two or more nodes of the graph whose node `n` has arrows to `next[n]`,
/// each sorted, in the order of their smallest node.
pub fn cycles(next: &[Vec<usize>]) -> Vec<Vec<usize>> {
    let mut tarjan = Tarjan {
        next,
        index: vec![None; next.len()],
        low: vec![0; next.len()],
        on_stack: vec![false; next.len()],
        stack: Vec::new(),
        counter: 0,
        components: Vec::new(),
    };
    for node in 0..next.len() {
        if tarjan.index[node].is_none() {
            tarjan.visit(node);
        }
    }
    let mut components = tarjan.components;
    for component in &mut components {
        component.sort_unstable();
    }
    components.sort();
    components
}

struct Tarjan<'a> {
    next: &'a [Vec<usize>],
    /// The order each node was first reached in; `None` until then.
    index: Vec<Option<usize>>,
    /// The smallest index reachable from the node through nodes still on the stack.
    low: Vec<usize>,
    on_stack: Vec<bool>,
    stack: Vec<usize>,
    counter: usize,
    components: Vec<Vec<usize>>,
}

impl Tarjan<'_> {
    /// Recursion is as deep as the longest import chain: a crate's file count at most.
    fn visit(&mut self, node: usize) {
        self.index[node] = Some(self.counter);
        self.low[node] = self.counter;
        self.counter += 1;
        self.stack.push(node);
        self.on_stack[node] = true;
        for &successor in &self.next[node] {
            match self.index[successor] {
                None => {
                    self.visit(successor);
                    self.low[node] = self.low[node].min(self.low[successor]);
                }
                Some(index) if self.on_stack[successor] => {
                    self.low[node] = self.low[node].min(index);
                }
                Some(_) => {}
            }
        }
        if Some(self.low[node]) == self.index[node] {
            let mut component = Vec::new();
            while let Some(member) = self.stack.pop() {
                self.on_stack[member] = false;
                component.push(member);
                if member == node {
                    break;
                }
            }
            if component.len() > 1 {
                self.components.push(component);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::cycles;

    #[test]
    fn finds_each_cycle_and_leaves_chains_out() {
        // 0 -> 1 -> 2 -> 0 is a cycle, 3 -> 4 -> 3 another, 5 -> 0 and 2 -> 3 join them to no one.
        let next = vec![
            vec![1],
            vec![2],
            vec![0, 3],
            vec![4],
            vec![3],
            vec![0],
            vec![],
        ];
        assert_eq!(cycles(&next), [vec![0, 1, 2], vec![3, 4]]);
    }

    #[test]
    fn a_graph_without_cycles_has_none() {
        let next = vec![vec![1, 2], vec![2], vec![]];
        assert!(cycles(&next).is_empty());
    }
}
