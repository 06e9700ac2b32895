//! What a scenario file says: its objects, steps, actions, faults and asserts, parsed and
//! checked before anything runs.

use std::time::Duration;

use kubewasm_devserver::{ResourceName, Verb};
use serde::Deserialize;
use serde_json::Value;

use super::matcher;

/// A parsed scenario file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// What the scenario shows (the JUnit test suite's name).
    #[serde(default)]
    pub name: Option<String>,
    /// Objects created before the plugins load, in order (a CRD before its objects), as the
    /// dev server seeds manifests: a `status` is kept, and the annotation
    /// `dev.kubewasm.io/controlled-by: apiVersion/Kind/name` becomes a controller owner
    /// reference to that object, created before it in the same namespace.
    #[serde(default)]
    pub objects: Vec<Value>,
    pub steps: Vec<Step>,
}

/// One step: at most one action, then the asserts.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Step {
    #[serde(default)]
    pub name: Option<String>,
    /// Creates each object, or merge-patches it with the given fields when it exists.
    #[serde(default)]
    pub apply: Vec<Value>,
    #[serde(default)]
    pub patch: Option<PatchAction>,
    /// Deletes each named object (apiVersion, kind, metadata.name and .namespace).
    #[serde(default)]
    pub delete: Vec<Value>,
    /// Lets this much time pass (`2s`, `500ms`): for plugins that requeue after a delay.
    #[serde(default, with = "duration_opt")]
    pub wait: Option<Duration>,
    #[serde(default)]
    pub fault: Option<Fault>,
    /// What the API server must answer the step's apply, patch or delete [default: every
    /// write accepted; one an admission webhook denies is tried again until the step's timeout,
    /// then fails the step with the API server's message].
    #[serde(default)]
    pub expect: Option<Expect>,
    /// How long the asserts may take to hold [default: `kubewasm test --timeout`, 30s].
    #[serde(default, with = "duration_opt")]
    pub timeout: Option<Duration>,
    #[serde(default)]
    pub assert: Assert,
}

/// A patch of one object.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PatchAction {
    /// apiVersion, kind, metadata.name and .namespace of the object.
    pub object: Value,
    /// `merge` (JSON merge patch, the default) or `json` (RFC 6902).
    #[serde(default, rename = "type")]
    pub patch_type: PatchType,
    pub patch: Value,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PatchType {
    #[default]
    Merge,
    Json,
}

/// A fault injected into the API server from this step on. The scenario's own requests (its
/// actions and asserts) go to the same server and meet the fault too.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Fault {
    /// The verb whose next requests fail: get, list, watch, create, update, patch or delete.
    #[serde(default)]
    pub verb: Option<String>,
    /// Only requests to this resource fail, or only its watches drop: the lower-case plural,
    /// `deployments`, or with its API group, `deployments.apps` [default: every resource].
    #[serde(default)]
    pub resource: Option<String>,
    /// The HTTP status they answer: 409, 429, 500, ...
    #[serde(default)]
    pub code: Option<u16>,
    /// How many requests fail [default: 1].
    #[serde(default)]
    pub count: Option<usize>,
    /// Ends every open watch now (of `resource` only, when given): clients must re-watch.
    #[serde(default)]
    pub drop_watches: bool,
}

/// The answer a step's action must get.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    /// Every write of the action is refused, each with a message containing this text
    /// (case-sensitive; as kube-apiserver words a webhook's denial: `admission webhook
    /// "NAME" denied the request: MESSAGE`). Nothing of an accepted write is undone: it fails
    /// the step.
    pub denied: String,
    /// The HTTP status each refusal must have (e.g. 403, or the code the policy gave).
    #[serde(default)]
    pub code: Option<u16>,
}

/// What must hold after a step.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Assert {
    /// Objects that must exist and contain the given fields (without a name: any object of the
    /// kind, in the namespace when one is given). A field's value may be an operator: `{$any:
    /// true}`, `{$absent: true}`, `{$changed: true}` (differs from when the step began),
    /// `{$matches: REGEX}`, `{$count: N}`.
    #[serde(default)]
    pub exist: Vec<Value>,
    /// Objects that must not exist (by apiVersion, kind, name and namespace).
    #[serde(default)]
    pub absent: Vec<Value>,
    /// core/v1 Events, each matched partially by some Event.
    #[serde(default)]
    pub events: Vec<Value>,
    /// How many objects match a partial object (of its kind, in its namespace when it gives
    /// one): three Pods with a label, no Secret left.
    #[serde(default)]
    pub count: Vec<ObjectCount>,
    /// How many writes each plugin made during this step (since the previous step ended; for
    /// the first step, since the plugins started loading).
    #[serde(default)]
    pub writes: Vec<WriteCount>,
    /// Lines a plugin must have logged during this step (since the previous step ended; for
    /// the first step, since the plugins started loading): how an observer, which only logs,
    /// is tested.
    #[serde(default)]
    pub logged: Vec<LoggedLineAssert>,
    /// After everything settles, reloading every plugin (one more reconcile of every key, and
    /// every handler replayed the cache) makes no write.
    #[serde(default)]
    pub converged: bool,
}

/// A bound on the writes (create, update, patch, delete) one plugin sent during a step.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WriteCount {
    /// The plugin: its key, the file's name without `.wasm` (the name its `init` declares
    /// matches too).
    pub plugin: String,
    #[serde(default)]
    pub exactly: Option<u64>,
    #[serde(default)]
    pub min: Option<u64>,
    #[serde(default)]
    pub max: Option<u64>,
}

/// A bound on how many objects match a partial object.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ObjectCount {
    /// apiVersion, kind, and any fields (operators too, but `$changed`) the objects counted
    /// contain; with `metadata.namespace`, only that namespace's.
    pub object: Value,
    #[serde(default)]
    pub exactly: Option<u64>,
    #[serde(default)]
    pub min: Option<u64>,
    #[serde(default)]
    pub max: Option<u64>,
}

/// `exactly`, `min` and `max` of a count, as an assert gives them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    pub exactly: Option<u64>,
    pub min: Option<u64>,
    pub max: Option<u64>,
}

impl Bounds {
    /// Whether `n` is within the bounds.
    pub fn hold(&self, n: u64) -> bool {
        self.exactly.is_none_or(|e| n == e)
            && self.min.is_none_or(|m| n >= m)
            && self.max.is_none_or(|m| n <= m)
    }

    fn is_empty(&self) -> bool {
        self.exactly.is_none() && self.min.is_none() && self.max.is_none()
    }
}

impl std::fmt::Display for Bounds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.exactly, self.min, self.max) {
            (Some(e), _, _) => write!(f, "exactly {e}"),
            (None, Some(min), Some(max)) => write!(f, "{min} to {max}"),
            (None, Some(min), None) => write!(f, "at least {min}"),
            (None, None, Some(max)) => write!(f, "at most {max}"),
            (None, None, None) => f.write_str("any number"),
        }
    }
}

impl WriteCount {
    pub fn bounds(&self) -> Bounds {
        Bounds {
            exactly: self.exactly,
            min: self.min,
            max: self.max,
        }
    }
}

impl ObjectCount {
    pub fn bounds(&self) -> Bounds {
        Bounds {
            exactly: self.exactly,
            min: self.min,
            max: self.max,
        }
    }
}

/// A line some plugin logged: through the `log` import, stdout or stderr, at any level.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoggedLineAssert {
    /// The plugin: its key, the file's name without `.wasm` (the name its `init` declares
    /// matches too).
    pub plugin: String,
    /// Text the line contains (part of it, case-sensitive).
    pub contains: String,
}

/// Why a scenario file was refused.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    #[error("the scenario is not valid YAML for a scenario: {0}")]
    Yaml(#[from] serde_norway::Error),
    #[error("{0}")]
    Invalid(String),
}

impl Scenario {
    /// Parses and checks a scenario: every object names apiVersion and kind, each step has at
    /// most one action, faults name a known verb or drop watches, write bounds bound something.
    pub fn parse(text: &str) -> Result<Scenario, ScenarioError> {
        let scenario: Scenario = serde_norway::from_str(text)?;
        let invalid = |msg: String| Err(ScenarioError::Invalid(msg));
        if scenario.steps.is_empty() {
            return invalid("the scenario has no steps".into());
        }
        for (i, object) in scenario.objects.iter().enumerate() {
            check_object(object, true)
                .map_err(|e| ScenarioError::Invalid(format!("objects[{i}]: {e}")))?;
        }
        for (n, step) in scenario.steps.iter().enumerate() {
            let at = format!("step {} ({})", n + 1, step.label(n));
            let actions = [
                !step.apply.is_empty(),
                step.patch.is_some(),
                !step.delete.is_empty(),
                step.wait.is_some(),
                step.fault.is_some(),
            ];
            if actions.iter().filter(|a| **a).count() > 1 {
                return invalid(format!(
                    "{at}: one action per step (apply, patch, delete, wait or fault): split it"
                ));
            }
            let objects = step
                .apply
                .iter()
                .map(|o| (o, true))
                .chain(step.delete.iter().map(|o| (o, true)))
                .chain(step.patch.iter().map(|p| (&p.object, true)))
                .chain(step.assert.absent.iter().map(|o| (o, true)))
                .chain(step.assert.exist.iter().map(|o| (o, false)));
            for (object, named) in objects {
                check_object(object, named)
                    .map_err(|e| ScenarioError::Invalid(format!("{at}: {e}")))?;
            }
            let asserted = step
                .assert
                .exist
                .iter()
                .map(|o| (format!("exist {}", matcher::describe(o)), o, true))
                .chain(
                    (step.assert.events.iter().enumerate())
                        .map(|(i, o)| (format!("events[{i}]"), o, false)),
                )
                .chain(step.assert.count.iter().map(|c| {
                    let what = format!("count {}", matcher::describe(&c.object));
                    (what, &c.object, false)
                }));
            for (what, object, changed_allowed) in asserted {
                matcher::check_operators(object, changed_allowed)
                    .map_err(|e| ScenarioError::Invalid(format!("{at}: {what}: {e}")))?;
            }
            for counted in &step.assert.count {
                check_object(&counted.object, false)
                    .map_err(|e| ScenarioError::Invalid(format!("{at}: count: {e}")))?;
                if counted.bounds().is_empty() {
                    return invalid(format!(
                        "{at}: count of {} needs exactly, min or max",
                        matcher::describe(&counted.object)
                    ));
                }
            }
            if let Some(expect) = &step.expect {
                if step.apply.is_empty() && step.patch.is_none() && step.delete.is_empty() {
                    return invalid(format!(
                        "{at}: `expect` is about the answer to the step's apply, patch or delete, \
                         and the step has none"
                    ));
                }
                if expect.denied.is_empty() {
                    return invalid(format!(
                        "{at}: expect.denied needs the text the refusal's message contains"
                    ));
                }
                if let Some(code) = expect.code
                    && !(400..=599).contains(&code)
                {
                    return invalid(format!(
                        "{at}: expect.code {code} is not an HTTP error status"
                    ));
                }
            }
            if let Some(fault) = &step.fault {
                if let Some(resource) = &fault.resource
                    && let Err(err) = resource.parse::<ResourceName>()
                {
                    return invalid(format!("{at}: fault resource {err}"));
                }
                match (&fault.verb, fault.code, fault.drop_watches) {
                    (Some(verb), Some(code), _) => {
                        if parse_verb(verb).is_none() {
                            return invalid(format!(
                                "{at}: fault verb `{verb}` is not one of get, list, watch, create, update, patch, delete"
                            ));
                        }
                        if !(400..=599).contains(&code) {
                            return invalid(format!(
                                "{at}: fault code {code} is not an HTTP error status"
                            ));
                        }
                    }
                    (None, None, true) => {}
                    _ => {
                        return invalid(format!(
                            "{at}: a fault is `verb` with `code` (and `count`), or `dropWatches: true`, \
                             either on one `resource`"
                        ));
                    }
                }
            }
            for logged in &step.assert.logged {
                if logged.contains.is_empty() {
                    return invalid(format!(
                        "{at}: logged of {} needs the text a line `contains`",
                        logged.plugin
                    ));
                }
            }
            for bound in &step.assert.writes {
                if bound.bounds().is_empty() {
                    return invalid(format!(
                        "{at}: writes of {} need exactly, min or max",
                        bound.plugin
                    ));
                }
            }
        }
        Ok(scenario)
    }
}

impl Step {
    /// The step's name, else what it does.
    pub fn label(&self, index: usize) -> String {
        if let Some(name) = &self.name {
            return name.clone();
        }
        let action = if !self.apply.is_empty() {
            "apply"
        } else if self.patch.is_some() {
            "patch"
        } else if !self.delete.is_empty() {
            "delete"
        } else if self.wait.is_some() {
            "wait"
        } else if self.fault.is_some() {
            "fault"
        } else {
            "assert"
        };
        format!("step {} ({action})", index + 1)
    }
}

/// An object reference must be a mapping with string apiVersion and kind (and, when `named`,
/// metadata.name).
fn check_object(object: &Value, named: bool) -> Result<(), String> {
    let text = |pointer: &str| object.pointer(pointer).and_then(Value::as_str);
    if !object.is_object() {
        return Err("an object must be a mapping".into());
    }
    if text("/apiVersion").is_none_or(str::is_empty) || text("/kind").is_none_or(str::is_empty) {
        return Err(format!("an object needs apiVersion and kind: {object}"));
    }
    if named && text("/metadata/name").is_none_or(str::is_empty) {
        return Err(format!("an object needs metadata.name here: {object}"));
    }
    Ok(())
}

/// The verb a scenario's fault names.
pub(super) fn parse_verb(verb: &str) -> Option<Verb> {
    Some(match verb.to_ascii_lowercase().as_str() {
        "get" => Verb::Get,
        "list" => Verb::List,
        "watch" => Verb::Watch,
        "create" => Verb::Create,
        "update" => Verb::Update,
        "patch" => Verb::Patch,
        "delete" => Verb::Delete,
        _ => return None,
    })
}

/// The longest duration a scenario or `--timeout` may give: a deadline is computed from it, and
/// one past the clock's range would panic; a test step waiting longer than a day is a mistake.
const MAX_DURATION: Duration = Duration::from_secs(24 * 60 * 60);

/// A duration as a scenario and `kubewasm test --timeout` write it: `15s`, `500ms`, `2m` or
/// plain seconds, at most a day.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let (number, scale) = if let Some(m) = text.strip_suffix("ms") {
        (m, 1e-3)
    } else if let Some(m) = text.strip_suffix('m') {
        (m, 60.0)
    } else {
        (text.strip_suffix('s').unwrap_or(text), 1.0)
    };
    number
        .trim()
        .parse::<f64>()
        .ok()
        .and_then(|n| Duration::try_from_secs_f64(n * scale).ok())
        .filter(|d| *d <= MAX_DURATION)
        .ok_or_else(|| format!("`{text}` is not a duration such as 30s or 500ms (at most 24h)"))
}

/// [`parse_duration`] for an optional field.
mod duration_opt {
    use std::time::Duration;

    use serde::de::Error;
    use serde::{Deserialize, Deserializer};

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Number(f64),
            Text(String),
        }
        let text = match Option::<Raw>::deserialize(d)? {
            None => return Ok(None),
            Some(Raw::Number(n)) => format!("{n}"),
            Some(Raw::Text(t)) => t,
        };
        super::parse_duration(&text)
            .map(Some)
            .map_err(D::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_parsed_and_hostile_ones_refused() {
        assert_eq!(parse_duration("1500ms"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration(" 2m "), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("5"), Ok(Duration::from_secs(5)));
        for bad in [
            "",
            "-1s",
            "NaN",
            "inf",
            "1e300",
            "1e15s",
            "25h",
            "30 seconds",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad:?}");
        }
    }

    const GOOD: &str = r#"
name: mirror
objects:
  - {apiVersion: v1, kind: ConfigMap, metadata: {name: a, namespace: default}, data: {k: v}}
steps:
  - name: copy appears
    timeout: 5s
    assert:
      exist:
        - {apiVersion: v1, kind: ConfigMap, metadata: {name: a-mirror}, data: {k: v}}
      absent:
        - {apiVersion: v1, kind: ConfigMap, metadata: {name: b-mirror}}
      writes: [{plugin: mirror, max: 1}]
      logged: [{plugin: mirror, contains: "copied a"}]
      count: [{object: {apiVersion: v1, kind: Pod, metadata: {labels: {app: web}}}, min: 1, max: 3}]
      converged: true
  - fault: {verb: update, code: 409, count: 2}
  - fault: {dropWatches: true}
  - fault: {verb: create, resource: deployments.apps, code: 429}
  - fault: {dropWatches: true, resource: configmaps}
  - patch: {object: {apiVersion: v1, kind: ConfigMap, metadata: {name: a}}, patch: {data: {k: w}}}
    timeout: 1500ms
  - wait: 2
  - delete: [{apiVersion: v1, kind: ConfigMap, metadata: {name: a}}]
  - apply: [{apiVersion: v1, kind: ConfigMap, metadata: {name: deny-me}}]
    expect: {denied: "denied deny-me", code: 422}
  - delete: [{apiVersion: v1, kind: ConfigMap, metadata: {name: a}}]
    expect: {denied: "protected"}
"#;

    #[test]
    fn a_scenario_with_every_step_kind_parses() {
        let s = Scenario::parse(GOOD).unwrap();
        assert_eq!(s.name.as_deref(), Some("mirror"));
        assert_eq!(s.steps.len(), 10);
        assert!(s.steps[..8].iter().all(|s| s.expect.is_none()));
        let denied = s.steps[8].expect.as_ref().unwrap();
        assert_eq!(
            (denied.denied.as_str(), denied.code),
            ("denied deny-me", Some(422))
        );
        assert_eq!(s.steps[9].expect.as_ref().unwrap().code, None);
        assert_eq!(s.steps[0].timeout, Some(Duration::from_secs(5)));
        assert!(s.steps[0].assert.converged);
        assert_eq!(s.steps[0].assert.logged[0].contains, "copied a");
        let counted = s.steps[0].assert.count[0].bounds();
        assert!(!counted.hold(0) && counted.hold(1) && counted.hold(3) && !counted.hold(4));
        assert_eq!(counted.to_string(), "1 to 3");
        assert_eq!(s.steps[1].fault.as_ref().unwrap().count, Some(2));
        assert!(s.steps[2].fault.as_ref().unwrap().drop_watches);
        let on_one = s.steps[3].fault.as_ref().unwrap();
        assert_eq!(on_one.resource.as_deref(), Some("deployments.apps"));
        assert_eq!(on_one.code, Some(429));
        let dropped = s.steps[4].fault.as_ref().unwrap();
        assert!(dropped.drop_watches);
        assert_eq!(dropped.resource.as_deref(), Some("configmaps"));
        assert_eq!(s.steps[5].timeout, Some(Duration::from_millis(1500)));
        assert_eq!(
            s.steps[5].patch.as_ref().unwrap().patch_type,
            PatchType::Merge
        );
        assert_eq!(s.steps[6].wait, Some(Duration::from_secs(2)));
        assert_eq!(s.steps[7].label(7), "step 8 (delete)");
    }

    #[test]
    fn mistakes_are_refused_with_where_they_are() {
        let cases = [
            ("steps: []", "no steps"),
            ("steps: [{asert: {}}]", "unknown field `asert`"),
            ("steps: [{wait: soon}]", "not a duration"),
            (
                "steps: [{wait: 1s, fault: {dropWatches: true}}]",
                "one action per step",
            ),
            ("steps: [{fault: {verb: frob, code: 500}}]", "`frob`"),
            (
                "steps: [{fault: {verb: get, code: 200}}]",
                "not an HTTP error",
            ),
            ("steps: [{fault: {code: 500}}]", "`verb` with `code`"),
            (
                "steps: [{fault: {verb: create, resource: Deployment, code: 409}}]",
                "`Deployment` is not a resource",
            ),
            (
                "steps: [{fault: {resource: configmaps}}]",
                "either on one `resource`",
            ),
            (
                "steps: [{assert: {writes: [{plugin: p}]}}]",
                "need exactly, min or max",
            ),
            (
                "steps: [{assert: {logged: [{plugin: p, contains: \"\"}]}}]",
                "needs the text",
            ),
            (
                "steps: [{assert: {logged: [{plugin: p}]}}]",
                "missing field `contains`",
            ),
            (
                "steps: [{delete: [{apiVersion: v1, kind: ConfigMap}]}]",
                "metadata.name",
            ),
            ("objects: [{kind: ConfigMap}]\nsteps: [{}]", "objects[0]"),
            ("steps: [{expect: {denied: x}}]", "the step has none"),
            (
                "steps: [{wait: 1s, expect: {denied: x}}]",
                "the step has none",
            ),
            (
                "steps: [{apply: [{apiVersion: v1, kind: ConfigMap, metadata: {name: a}}], expect: {denied: \"\"}}]",
                "expect.denied needs the text",
            ),
            (
                "steps: [{apply: [{apiVersion: v1, kind: ConfigMap, metadata: {name: a}}], expect: {denied: x, code: 200}}]",
                "expect.code 200 is not an HTTP error",
            ),
            (
                "steps: [{apply: [{apiVersion: v1, kind: ConfigMap, metadata: {name: a}}], expect: {code: 403}}]",
                "missing field `denied`",
            ),
            (
                "steps: [{apply: [{apiVersion: v1, kind: ConfigMap, metadata: {name: a}}], expect: {allowed: true, denied: x}}]",
                "unknown field `allowed`",
            ),
            (
                "steps: [{assert: {exist: [{metadata: {name: a}}]}}]",
                "apiVersion and kind",
            ),
            (
                "steps: [{assert: {count: [{object: {apiVersion: v1, kind: Pod}}]}}]",
                "count of v1 Pod (any name) needs exactly, min or max",
            ),
            (
                "steps: [{assert: {count: [{object: {kind: Pod}, exactly: 1}]}}]",
                "count: an object needs apiVersion and kind",
            ),
            (
                "steps: [{assert: {count: [{object: {apiVersion: v1, kind: Pod, spec: {$changed: true}}, exactly: 1}]}}]",
                "count v1 Pod (any name): .spec: `$changed` compares with the object when the step began",
            ),
            (
                "steps: [{assert: {events: [{reason: {$matches: \"(\"}}]}}]",
                "events[0]: .reason: `$matches` \"(\" is not a regular expression",
            ),
        ];
        for (text, want) in cases {
            let err = Scenario::parse(text).unwrap_err().to_string();
            assert!(err.contains(want), "{text}: {err}");
        }
    }
}
