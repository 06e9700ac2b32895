//! Label selectors: `a=b`, `a!=b`, `a in (x,y)`, `a notin (x)`, `a`, `!a`, `a>1`, `a<1`.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use crate::ParseError;
use crate::lexer::{Token, tokenize};
use crate::validate;

/// A parsed label selector in the API server's syntax; requirements separated by commas must all
/// hold. The empty selector matches everything.
///
/// Requirements are kept sorted by key, so two selectors that differ only in order or spelling
/// (`==` for `=`) compare equal and display the same canonical text.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Selector {
    requirements: Vec<Requirement>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct Requirement {
    key: String,
    op: Operator,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Operator {
    /// The label exists (`key`).
    Exists,
    /// The label does not exist (`!key`).
    DoesNotExist,
    /// The label exists with this value (`key=value`).
    Equals(String),
    /// The label is absent or has another value (`key!=value`).
    NotEquals(String),
    /// The label exists with one of these values.
    In(BTreeSet<String>),
    /// The label is absent or has none of these values.
    NotIn(BTreeSet<String>),
    /// The label is an integer greater than this.
    GreaterThan(i64),
    /// The label is an integer less than this.
    LessThan(i64),
}

impl Selector {
    /// Parses a selector such as `app=web,tier in (a,b),!legacy`. Whitespace around tokens is
    /// ignored; keys and values must be valid Kubernetes label keys and values.
    pub fn parse(input: &str) -> Result<Selector, ParseError> {
        Parser {
            input,
            tokens: tokenize(input),
            next: 0,
        }
        .parse()
    }

    /// The selector that matches every object.
    pub fn everything() -> Selector {
        Selector::default()
    }

    /// True for the empty selector, which matches every object.
    pub fn is_everything(&self) -> bool {
        self.requirements.is_empty()
    }

    /// Whether an object's labels satisfy every requirement; `lookup(key)` returns the value of
    /// the object's label `key` if it has one.
    pub fn matches<'a>(&self, lookup: impl Fn(&str) -> Option<&'a str>) -> bool {
        self.requirements.iter().all(|r| r.matches(lookup(&r.key)))
    }

    /// [`Selector::matches`] for labels held in a map.
    pub fn matches_map(&self, labels: &BTreeMap<String, String>) -> bool {
        self.matches(|key| labels.get(key).map(String::as_str))
    }
}

impl Requirement {
    fn matches(&self, value: Option<&str>) -> bool {
        match (&self.op, value) {
            (Operator::Exists, v) => v.is_some(),
            (Operator::DoesNotExist, v) => v.is_none(),
            (Operator::Equals(want), Some(v)) => v == want,
            (Operator::NotEquals(want), v) => v != Some(want.as_str()),
            (Operator::In(set), Some(v)) => set.contains(v),
            (Operator::NotIn(set), v) => v.is_none_or(|v| !set.contains(v)),
            (Operator::GreaterThan(n), Some(v)) => v.parse::<i64>().is_ok_and(|v| v > *n),
            (Operator::LessThan(n), Some(v)) => v.parse::<i64>().is_ok_and(|v| v < *n),
            (_, None) => false,
        }
    }
}

impl fmt::Display for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{r}")?;
        }
        Ok(())
    }
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let key = &self.key;
        let join = |set: &BTreeSet<String>| set.iter().cloned().collect::<Vec<_>>().join(",");
        match &self.op {
            Operator::Exists => write!(f, "{key}"),
            Operator::DoesNotExist => write!(f, "!{key}"),
            Operator::Equals(v) => write!(f, "{key}={v}"),
            Operator::NotEquals(v) => write!(f, "{key}!={v}"),
            Operator::In(set) => write!(f, "{key} in ({})", join(set)),
            Operator::NotIn(set) => write!(f, "{key} notin ({})", join(set)),
            Operator::GreaterThan(n) => write!(f, "{key}>{n}"),
            Operator::LessThan(n) => write!(f, "{key}<{n}"),
        }
    }
}

impl std::str::FromStr for Selector {
    type Err = ParseError;

    fn from_str(s: &str) -> Result<Selector, ParseError> {
        Selector::parse(s)
    }
}

/// A recursive-descent parser over the token list.
struct Parser<'s> {
    input: &'s str,
    tokens: Vec<(Token<'s>, usize)>,
    next: usize,
}

impl<'s> Parser<'s> {
    fn parse(mut self) -> Result<Selector, ParseError> {
        let mut requirements = Vec::new();
        if self.tokens.is_empty() {
            return Ok(Selector::everything());
        }
        loop {
            requirements.push(self.requirement()?);
            match self.advance() {
                None => break,
                Some((Token::Comma, _)) => {}
                Some((_, pos)) => return Err(self.error(pos, "expected ',' or the end")),
            }
        }
        requirements.sort();
        requirements.dedup();
        Ok(Selector { requirements })
    }

    fn advance(&mut self) -> Option<(Token<'s>, usize)> {
        let token = self.tokens.get(self.next).cloned();
        self.next += 1;
        token
    }

    fn peek(&self) -> Option<&Token<'s>> {
        self.tokens.get(self.next).map(|(t, _)| t)
    }

    fn position(&self) -> usize {
        self.tokens
            .get(self.next)
            .map_or(self.input.len(), |(_, p)| *p)
    }

    fn error(&self, position: usize, message: impl Into<String>) -> ParseError {
        ParseError::new(self.input, position, message)
    }

    fn key(&mut self) -> Result<String, ParseError> {
        let pos = self.position();
        match self.advance() {
            Some((Token::Word(word), _)) => {
                validate::label_key(word).map_err(|why| self.error(pos, why))?;
                Ok(word.to_owned())
            }
            _ => Err(self.error(pos, "expected a label key")),
        }
    }

    /// A value after `=` or `!=`; the value may be empty (`a=` selects `a` set to "").
    fn value(&mut self) -> Result<String, ParseError> {
        let pos = self.position();
        match self.peek() {
            Some(Token::Word(word)) => {
                let word = *word;
                self.next += 1;
                validate::label_value(word).map_err(|why| self.error(pos, why))?;
                Ok(word.to_owned())
            }
            None | Some(Token::Comma) => Ok(String::new()),
            Some(_) => Err(self.error(pos, "expected a label value")),
        }
    }

    fn set(&mut self) -> Result<BTreeSet<String>, ParseError> {
        let pos = self.position();
        if !matches!(self.advance(), Some((Token::OpenParen, _))) {
            return Err(self.error(pos, "expected '(' to open a set of values"));
        }
        let mut values = BTreeSet::new();
        loop {
            let pos = self.position();
            match self.advance() {
                Some((Token::Word(word), _)) => {
                    validate::label_value(word).map_err(|why| self.error(pos, why))?;
                    values.insert(word.to_owned());
                }
                Some((Token::CloseParen, _)) if values.is_empty() => {
                    return Err(self.error(pos, "a set of values must not be empty"));
                }
                _ => return Err(self.error(pos, "expected a value in the set")),
            }
            let pos = self.position();
            match self.advance() {
                Some((Token::Comma, _)) => {}
                Some((Token::CloseParen, _)) => return Ok(values),
                _ => return Err(self.error(pos, "expected ',' or ')' in the set")),
            }
        }
    }

    fn integer(&mut self) -> Result<i64, ParseError> {
        let pos = self.position();
        match self.advance() {
            Some((Token::Word(word), _)) => word
                .parse()
                .map_err(|_| self.error(pos, format!("{word:?} is not an integer"))),
            _ => Err(self.error(pos, "expected an integer")),
        }
    }

    fn requirement(&mut self) -> Result<Requirement, ParseError> {
        if matches!(self.peek(), Some(Token::Not)) {
            self.next += 1;
            let key = self.key()?;
            return Ok(Requirement {
                key,
                op: Operator::DoesNotExist,
            });
        }
        let key = self.key()?;
        let pos = self.position();
        let op = match self.peek() {
            None | Some(Token::Comma) => Operator::Exists,
            Some(Token::Equals) => {
                self.next += 1;
                Operator::Equals(self.value()?)
            }
            Some(Token::NotEquals) => {
                self.next += 1;
                Operator::NotEquals(self.value()?)
            }
            Some(Token::Word("in")) => {
                self.next += 1;
                Operator::In(self.set()?)
            }
            Some(Token::Word("notin")) => {
                self.next += 1;
                Operator::NotIn(self.set()?)
            }
            Some(Token::Greater) => {
                self.next += 1;
                Operator::GreaterThan(self.integer()?)
            }
            Some(Token::Less) => {
                self.next += 1;
                Operator::LessThan(self.integer()?)
            }
            Some(_) => {
                return Err(self.error(
                    pos,
                    "expected an operator (=, ==, !=, in, notin, >, <), ',' or the end",
                ));
            }
        };
        Ok(Requirement { key, op })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn check(selector: &str, pairs: &[(&str, &str)]) -> bool {
        Selector::parse(selector)
            .unwrap()
            .matches_map(&labels(pairs))
    }

    #[test]
    fn empty_selector_matches_everything() {
        let s = Selector::parse("  ").unwrap();
        assert!(s.is_everything());
        assert_eq!(s, Selector::everything());
        assert!(s.matches_map(&labels(&[])));
        assert_eq!(s.to_string(), "");
    }

    #[test]
    fn equality_requires_the_label_with_that_value() {
        assert!(check("app=web", &[("app", "web")]));
        assert!(check("app==web", &[("app", "web")]));
        assert!(!check("app=web", &[("app", "db")]));
        assert!(!check("app=web", &[]));
    }

    #[test]
    fn inequality_matches_absent_labels() {
        assert!(check("app!=web", &[]));
        assert!(check("app!=web", &[("app", "db")]));
        assert!(!check("app!=web", &[("app", "web")]));
    }

    #[test]
    fn set_operators_follow_api_server_semantics() {
        assert!(check("tier in (a, b)", &[("tier", "b")]));
        assert!(!check("tier in (a,b)", &[("tier", "c")]));
        assert!(!check("tier in (a,b)", &[]));
        assert!(check("tier notin (a,b)", &[("tier", "c")]));
        assert!(check("tier notin (a,b)", &[]));
        assert!(!check("tier notin (a,b)", &[("tier", "a")]));
    }

    #[test]
    fn existence_operators_ignore_the_value() {
        assert!(check("app", &[("app", "")]));
        assert!(!check("app", &[("other", "x")]));
        assert!(check("!app", &[("other", "x")]));
        assert!(!check("!app", &[("app", "x")]));
    }

    #[test]
    fn numeric_comparisons_need_integer_labels() {
        assert!(check("replicas>2", &[("replicas", "3")]));
        assert!(!check("replicas>2", &[("replicas", "two")]));
        assert!(check("replicas<2", &[("replicas", "1")]));
        assert!(!check("replicas<2", &[]));
    }

    #[test]
    fn comma_means_and() {
        let s = "app=web,tier in (front),!legacy";
        assert!(check(s, &[("app", "web"), ("tier", "front")]));
        assert!(!check(
            s,
            &[("app", "web"), ("tier", "front"), ("legacy", "y")]
        ));
        assert!(!check(s, &[("app", "web")]));
    }

    #[test]
    fn empty_value_selects_empty_labels() {
        assert!(check("app=", &[("app", "")]));
        assert!(check("app=,b", &[("app", ""), ("b", "x")]));
        assert!(!check("app=", &[("app", "x")]));
    }

    #[test]
    fn display_is_canonical_and_round_trips() {
        let s = Selector::parse("z==1, a notin (y,x),  !m, k in (b,a)").unwrap();
        assert_eq!(s.to_string(), "a notin (x,y),k in (a,b),!m,z=1");
        assert_eq!(Selector::parse(&s.to_string()).unwrap(), s);
        assert_eq!(
            s,
            Selector::parse("k in (a,b),z=1,a notin (x,y),!m").unwrap()
        );
    }

    #[test]
    fn prefixed_keys_are_accepted() {
        assert!(check(
            "app.kubernetes.io/name=web",
            &[("app.kubernetes.io/name", "web")]
        ));
    }

    #[test]
    fn malformed_selectors_report_where() {
        let cases = [
            ("app=web,", 8),
            ("app in ()", 8),
            ("app in (a", 9),
            ("app in a", 7),
            ("=web", 0),
            ("app=web=x", 7),
            ("app web", 4),
            ("app=-bad", 4),
            ("app>x", 4),
            ("!", 1),
            ("a,,b", 2),
        ];
        for (input, position) in cases {
            let err = Selector::parse(input).unwrap_err();
            assert_eq!(err.position, position, "{input}: {err}");
            assert!(err.to_string().contains(input), "{err}");
        }
    }

    #[test]
    fn matches_takes_any_lookup() {
        let s = Selector::parse("app=web").unwrap();
        let owned = String::from("web");
        assert!(s.matches(|k| (k == "app").then_some(owned.as_str())));
        assert!(!s.matches(|_| None));
    }
}
