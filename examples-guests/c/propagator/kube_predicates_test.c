// Native tests of kube.c's queue rules with predicates, compiled with the generated bindings of
// contract 0.2.2's world `reconciler` on the include path (`cargo test -p xtask` writes them and
// compiles and runs this with the host's cc).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kube.h"

#ifndef KUBE_HAS_PREDICATES
#error "kube.h did not find reconciler.h: the test needs 0.2.2's bindings on the include path"
#endif

static int failures = 0;

static void check(int ok, const char *what) {
    if (!ok) {
        failures++;
        fprintf(stderr, "FAIL %s\n", what);
    }
}

int main(void) {
    kube_queue_spec_t spec;

    // A rule alone: every update.
    check(kube_when(kube_own_key(), NULL, 0, &spec), "a rule without predicates");
    check(spec.rule.tag == KUBEWASM_CONTROLLER_0_2_0_TYPES_QUEUE_RULE_OWN_KEY, "own key");
    check(spec.when.ptr == NULL && spec.when.len == 0, "no predicates: every update");

    // The sample-controller's Foo rule: a spec change only.
    const kube_predicate_t generation[] = {KUBE_GENERATION};
    check(kube_when(kube_own_key(), generation, 1, &spec), "a generation rule");
    check(spec.when.len == 1 && spec.when.ptr[0] == KUBE_GENERATION, "generation kept");
    check(spec.when.ptr != generation, "the list is the spec's own copy");
    free(spec.when.ptr);

    // Several predicates on an owner rule, in order; the WIT's case numbers.
    const kube_predicate_t metadata[] = {KUBE_LABELS, KUBE_ANNOTATIONS, KUBE_RESOURCE_VERSION};
    check(kube_when(kube_controlling_owner(3), metadata, 3, &spec), "an owner rule");
    check(spec.rule.tag == KUBEWASM_CONTROLLER_0_2_0_TYPES_QUEUE_RULE_CONTROLLING_OWNER &&
              spec.rule.val.controlling_owner == 3,
          "controlling owner of subscription 3");
    check(spec.when.len == 3 && spec.when.ptr[0] == KUBE_LABELS &&
              spec.when.ptr[1] == KUBE_ANNOTATIONS && spec.when.ptr[2] == KUBE_RESOURCE_VERSION,
          "predicates in order");
    free(spec.when.ptr);
    check(KUBE_RESOURCE_VERSION == 0 && KUBE_GENERATION == 1 && KUBE_LABELS == 2 &&
              KUBE_ANNOTATIONS == 3,
          "the enum's cases as the WIT orders them");

    // A number that is no predicate: refused, nothing written.
    const kube_predicate_t bad[] = {KUBE_GENERATION, 4};
    kube_queue_spec_t untouched = {0};
    check(!kube_when(kube_own_key(), bad, 2, &untouched), "an unknown predicate is refused");
    check(untouched.when.ptr == NULL && untouched.when.len == 0, "nothing written on refusal");

    if (failures) return 1;
    printf("kube_predicates_test: ok\n");
    return 0;
}
