//! [`Event`]: one notification from the host, its objects already parsed into the handler's type.

/// What happened to an object of a watched resource.
#[derive(Debug, Clone, PartialEq)]
pub enum Event<T> {
    /// The object appeared. `in_initial_list` is true for the informer's first list and for the
    /// replay a plugin receives when it is loaded, reloaded or restarted.
    Added {
        /// The object as added.
        object: T,
        /// Part of a list (initial sync, or the replay after a load or restart), not watched.
        in_initial_list: bool,
    },
    /// The object changed. On a resync `old` and `new` are the same state.
    Updated {
        /// The state the cache held before.
        old: T,
        /// The state now.
        new: T,
    },
    /// The object went away. With `final_state_unknown` the deletion was noticed on a relist:
    /// `object` is then the last state the cache knew.
    Deleted {
        /// The last state seen.
        object: T,
        /// The deletion was noticed on a relist, not watched.
        final_state_unknown: bool,
    },
}

impl<T> Event<T> {
    /// The object as it is now: the added object, the new state, or the deleted object's last.
    pub fn object(&self) -> &T {
        match self {
            Event::Added { object, .. } | Event::Deleted { object, .. } => object,
            Event::Updated { new, .. } => new,
        }
    }

    /// Takes the object as it is now (see [`Event::object`]).
    pub fn into_object(self) -> T {
        match self {
            Event::Added { object, .. } | Event::Deleted { object, .. } => object,
            Event::Updated { new, .. } => new,
        }
    }

    /// Whether the object is gone.
    pub fn is_delete(&self) -> bool {
        matches!(self, Event::Deleted { .. })
    }
}

/// An event as it crossed the boundary: the host's JSON, not yet parsed.
#[derive(Debug, Clone, Copy)]
pub(crate) enum RawEvent<'a> {
    Added {
        object: &'a str,
        in_initial_list: bool,
    },
    Updated {
        old: &'a str,
        new: &'a str,
    },
    Deleted {
        object: &'a str,
        final_state_unknown: bool,
    },
}

impl RawEvent<'_> {
    /// Parses each object of the event once into `T`.
    pub(crate) fn parse<T: serde::de::DeserializeOwned>(
        self,
    ) -> Result<Event<T>, serde_json::Error> {
        Ok(match self {
            RawEvent::Added {
                object,
                in_initial_list,
            } => Event::Added {
                object: serde_json::from_str(object)?,
                in_initial_list,
            },
            RawEvent::Updated { old, new } => Event::Updated {
                old: serde_json::from_str(old)?,
                new: serde_json::from_str(new)?,
            },
            RawEvent::Deleted {
                object,
                final_state_unknown,
            } => Event::Deleted {
                object: serde_json::from_str(object)?,
                final_state_unknown,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;

    use super::*;

    #[test]
    fn raw_updates_parse_both_states_into_the_handler_type() {
        let old = r#"{"metadata":{"name":"c","resourceVersion":"1"},"data":{"k":"a"}}"#;
        let new = r#"{"metadata":{"name":"c","resourceVersion":"2"},"data":{"k":"b"}}"#;
        let event: Event<ConfigMap> = RawEvent::Updated { old, new }.parse().unwrap();
        let Event::Updated { old, new } = &event else {
            panic!("expected an update, got {event:?}");
        };
        assert_eq!(old.data.as_ref().unwrap()["k"], "a");
        assert_eq!(new.data.as_ref().unwrap()["k"], "b");
        assert_eq!(
            event.object().metadata.resource_version.as_deref(),
            Some("2")
        );
    }

    #[test]
    fn raw_events_keep_their_flags() {
        let event: Event<serde_json::Value> = RawEvent::Deleted {
            object: "{}",
            final_state_unknown: true,
        }
        .parse()
        .unwrap();
        assert!(event.is_delete());
        assert_eq!(
            event,
            Event::Deleted {
                object: serde_json::json!({}),
                final_state_unknown: true
            }
        );
    }

    #[test]
    fn objects_of_another_kind_fail_to_parse() {
        let pod = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"}}"#;
        let parsed = RawEvent::Added {
            object: pod,
            in_initial_list: false,
        }
        .parse::<ConfigMap>();
        assert!(parsed.is_err());
    }
}
