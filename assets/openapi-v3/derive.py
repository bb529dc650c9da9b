#!/usr/bin/env python3
"""Writes the OpenAPI v3 documents of autoscaling/v1 and events.k8s.io/v1, which the
recording lacks, from the recorded ones: the paths of autoscaling/v2 and of core/v1
Events renamed to their group version, and the kinds' schemas as upstream publishes
them (kubernetes/kubernetes api/openapi-spec/v3/apis__autoscaling__v1_openapi.json and
apis__events.k8s.io__v1_openapi.json), written in the live server's style (`allOf`
around a described `$ref`, keys in its order, minified) and narrowed to the schemas the
paths reach. Run from the repository root: python3 assets/openapi-v3/derive.py
"""
import json
import re

HERE = "assets/openapi-v3/"
T = "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md"
API_VERSION = f"APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values. More info: {T}#resources"
KIND = f"Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: {T}#types-kinds"
META = "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1."


def ref(name, description=None, default=None):
    out = {}
    if description is not None:
        out["description"] = description
    if default is not None:
        out["default"] = default
    out["allOf"] = [{"$ref": name}]
    return out


def gvk(group, kind, version):
    return [{"group": group, "kind": kind, "version": version}]


def integer(description, fmt="int32", default=None):
    out = {"description": description, "type": "integer", "format": fmt}
    if default is not None:
        out["default"] = default
    return out


def string(description, default=None):
    out = {"description": description, "type": "string"}
    if default is not None:
        out["default"] = default
    return out


AS = "#/components/schemas/io.k8s.api.autoscaling.v1."
HPA_SCHEMAS = {
    "io.k8s.api.autoscaling.v1.CrossVersionObjectReference": {
        "description": "CrossVersionObjectReference contains enough information to let you identify the referred resource.",
        "type": "object",
        "required": ["kind", "name"],
        "properties": {
            "apiVersion": string("API version of the referent"),
            "kind": string(f"Kind of the referent; More info: {T}#types-kinds\"", ""),
            "name": string("Name of the referent; More info: http://kubernetes.io/docs/user-guide/identifiers#names", ""),
        },
        "x-kubernetes-map-type": "atomic",
    },
    "io.k8s.api.autoscaling.v1.HorizontalPodAutoscaler": {
        "description": "configuration of a horizontal pod autoscaler.",
        "type": "object",
        "properties": {
            "apiVersion": string(API_VERSION),
            "kind": string(KIND),
            "metadata": ref(META + "ObjectMeta", f"Standard object metadata. More info: {T}#metadata", {}),
            "spec": ref(AS + "HorizontalPodAutoscalerSpec", f"spec defines the behaviour of autoscaler. More info: {T}#spec-and-status.".replace("spec defines the behaviour", "behaviour"), {}),
            "status": ref(AS + "HorizontalPodAutoscalerStatus", "current information about the autoscaler.", {}),
        },
        "x-kubernetes-group-version-kind": gvk("autoscaling", "HorizontalPodAutoscaler", "v1"),
    },
    "io.k8s.api.autoscaling.v1.HorizontalPodAutoscalerList": {
        "description": "list of horizontal pod autoscaler objects.",
        "type": "object",
        "required": ["items"],
        "properties": {
            "apiVersion": string(API_VERSION),
            "items": {"description": "list of horizontal pod autoscaler objects.", "type": "array", "items": {"$ref": AS + "HorizontalPodAutoscaler"}},
            "kind": string(KIND),
            "metadata": ref(META + "ListMeta", "Standard list metadata.", {}),
        },
        "x-kubernetes-group-version-kind": gvk("autoscaling", "HorizontalPodAutoscalerList", "v1"),
    },
    "io.k8s.api.autoscaling.v1.HorizontalPodAutoscalerSpec": {
        "description": "specification of a horizontal pod autoscaler.",
        "type": "object",
        "required": ["scaleTargetRef", "maxReplicas"],
        "properties": {
            "maxReplicas": integer("upper limit for the number of pods that can be set by the autoscaler; cannot be smaller than MinReplicas.", default=0),
            "minReplicas": integer("minReplicas is the lower limit for the number of replicas to which the autoscaler can scale down.  It defaults to 1 pod.  minReplicas is allowed to be 0 if the alpha feature gate HPAScaleToZero is enabled and at least one Object or External metric is configured.  Scaling is active as long as at least one metric value is available."),
            "scaleTargetRef": ref(AS + "CrossVersionObjectReference", "reference to scaled resource; horizontal pod autoscaler will learn the current resource consumption and will set the desired number of pods by using its Scale subresource.", {}),
            "targetCPUUtilizationPercentage": integer("target average CPU utilization (represented as a percentage of requested CPU) over all the pods; if not specified the default autoscaling policy will be used."),
        },
    },
    "io.k8s.api.autoscaling.v1.HorizontalPodAutoscalerStatus": {
        "description": "current status of a horizontal pod autoscaler",
        "type": "object",
        "required": ["currentReplicas", "desiredReplicas"],
        "properties": {
            "currentCPUUtilizationPercentage": integer("current average CPU utilization over all pods, represented as a percentage of requested CPU, e.g. 70 means that an average pod is using now 70% of its requested CPU."),
            "currentReplicas": integer("current number of replicas of pods managed by this autoscaler.", default=0),
            "desiredReplicas": integer("desired number of replicas of pods managed by this autoscaler.", default=0),
            "lastScaleTime": ref(META + "Time", "last time the HorizontalPodAutoscaler scaled the number of pods; used by the autoscaler to control how often the number of pods is changed."),
            "observedGeneration": integer("most recent generation observed by this autoscaler.", "int64"),
        },
    },
}

EV = "#/components/schemas/io.k8s.api.events.v1."
CORE = "#/components/schemas/io.k8s.api.core.v1."
COMPAT = "is the deprecated field assuring backward compatibility with core.v1 Event type."
EVENT_SCHEMAS = {
    "io.k8s.api.events.v1.Event": {
        "description": "Event is a report of an event somewhere in the cluster. It generally denotes some state change in the system. Events have a limited retention time and triggers and messages may evolve with time.  Event consumers should not rely on the timing of an event with a given Reason reflecting a consistent underlying trigger, or the continued existence of events with that Reason.  Events should be treated as informative, best-effort, supplemental data.",
        "type": "object",
        "required": ["eventTime"],
        "properties": {
            "action": string("action is what action was taken/failed regarding to the regarding object. It is machine-readable. This field cannot be empty for new Events and it can have at most 128 characters."),
            "apiVersion": string(API_VERSION),
            "deprecatedCount": integer(f"deprecatedCount {COMPAT}"),
            "deprecatedFirstTimestamp": ref(META + "Time", f"deprecatedFirstTimestamp {COMPAT}", {}),
            "deprecatedLastTimestamp": ref(META + "Time", f"deprecatedLastTimestamp {COMPAT}", {}),
            "deprecatedSource": ref(CORE + "EventSource", f"deprecatedSource {COMPAT}", {}),
            "eventTime": ref(META + "MicroTime", "eventTime is the time when this Event was first observed. It is required.", {}),
            "kind": string(KIND),
            "metadata": ref(META + "ObjectMeta", f"Standard object's metadata. More info: {T}#metadata", {}),
            "note": string("note is a human-readable description of the status of this operation. Maximal length of the note is 1kB, but libraries should be prepared to handle values up to 64kB."),
            "reason": string("reason is why the action was taken. It is human-readable. This field cannot be empty for new Events and it can have at most 128 characters."),
            "regarding": ref(CORE + "ObjectReference", "regarding contains the object this Event is about. In most cases it's an Object reporting controller implements, e.g. ReplicaSetController implements ReplicaSets and this event is emitted because it acts on some changes in a ReplicaSet object.", {}),
            "related": ref(CORE + "ObjectReference", "related is the optional secondary object for more complex actions. E.g. when regarding object triggers a creation or deletion of related object."),
            "reportingController": string("reportingController is the name of the controller that emitted this Event, e.g. `kubernetes.io/kubelet`. This field cannot be empty for new Events."),
            "reportingInstance": string("reportingInstance is the ID of the controller instance, e.g. `kubelet-xyzf`. This field cannot be empty for new Events and it can have at most 128 characters."),
            "series": ref(EV + "EventSeries", "series is data about the Event series this event represents or nil if it's a singleton Event."),
            "type": string("type is the type of this event (Normal, Warning), new types could be added in the future. It is machine-readable. This field cannot be empty for new Events."),
        },
        "x-kubernetes-group-version-kind": gvk("events.k8s.io", "Event", "v1"),
    },
    "io.k8s.api.events.v1.EventList": {
        "description": "EventList is a list of Event objects.",
        "type": "object",
        "required": ["items"],
        "properties": {
            "apiVersion": string(API_VERSION),
            "items": {"description": "items is a list of schema objects.", "type": "array", "items": {"$ref": EV + "Event"}},
            "kind": string(KIND),
            "metadata": ref(META + "ListMeta", f"Standard list metadata. More info: {T}#metadata", {}),
        },
        "x-kubernetes-group-version-kind": gvk("events.k8s.io", "EventList", "v1"),
    },
    "io.k8s.api.events.v1.EventSeries": {
        "description": "EventSeries contain information on series of events, i.e. thing that was/is happening continuously for some time. How often to update the EventSeries is up to the event reporters. The default event reporter in \"k8s.io/client-go/tools/events/event_broadcaster.go\" shows how this struct is updated on heartbeats and can guide customized reporter implementations.",
        "type": "object",
        "required": ["count", "lastObservedTime"],
        "properties": {
            "count": integer("count is the number of occurrences in this series up to the last heartbeat time.", default=0),
            "lastObservedTime": ref(META + "MicroTime", "lastObservedTime is the time when last Event from the series was seen before last heartbeat.", {}),
        },
    },
}


def reachable(paths, schemas):
    """The names of the schemas the paths reach, through any `$ref`."""
    seen = set()
    todo = re.findall(r'"#/components/schemas/([^"]+)"', json.dumps(paths))
    while todo:
        name = todo.pop()
        if name in seen or name not in schemas:
            continue
        seen.add(name)
        todo.extend(re.findall(r'"#/components/schemas/([^"]+)"', json.dumps(schemas[name])))
    return seen


def document(paths, schemas, security):
    keep = reachable(paths, schemas)
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "1.36"},
        "paths": paths,
        "components": {
            "schemas": {k: schemas[k] for k in sorted(keep)},
            "securitySchemes": security,
        },
    }


def write(name, doc):
    with open(HERE + name, "w") as f:
        json.dump(doc, f, separators=(",", ":"), ensure_ascii=False)


def autoscaling_v1():
    v2 = json.load(open(HERE + "apis_autoscaling_v2.json"))
    text = json.dumps(v2["paths"])
    text = (text.replace("/apis/autoscaling/v2/", "/apis/autoscaling/v1/")
            .replace("autoscaling_v2", "autoscaling_v1")
            .replace("AutoscalingV2", "AutoscalingV1")
            .replace("io.k8s.api.autoscaling.v2.", "io.k8s.api.autoscaling.v1.")
            .replace('"group": "autoscaling", "version": "v2"', '"group": "autoscaling", "version": "v1"'))
    paths = json.loads(text)
    schemas = {k: v for k, v in v2["components"]["schemas"].items() if "autoscaling.v2" not in k}
    schemas.update(HPA_SCHEMAS)
    write("apis_autoscaling_v1.json", document(paths, schemas, v2["components"]["securitySchemes"]))


def events_v1():
    core = json.load(open(HERE + "api_v1.json"))
    v2 = json.load(open(HERE + "apis_autoscaling_v2.json"))
    paths = {}
    resources = json.loads(json.dumps(v2["paths"]["/apis/autoscaling/v2/"])
                           .replace("autoscaling_v2", "events_v1")
                           .replace("AutoscalingV2", "EventsV1"))
    paths["/apis/events.k8s.io/v1/"] = resources
    for path, item in core["paths"].items():
        if not re.search(r"/events(/\{name\})?$", path):
            continue
        text = (json.dumps(item).replace("core_v1", "events_v1").replace("CoreV1", "EventsV1")
                .replace("io.k8s.api.core.v1.EventList", "io.k8s.api.events.v1.EventList")
                .replace('io.k8s.api.core.v1.Event"', 'io.k8s.api.events.v1.Event"')
                .replace('"group": "", "version": "v1", "kind": "Event"', '"group": "events.k8s.io", "version": "v1", "kind": "Event"'))
        paths[path.replace("/api/v1/", "/apis/events.k8s.io/v1/")] = json.loads(text)
    schemas = dict(core["components"]["schemas"])
    schemas.update(EVENT_SCHEMAS)
    write("apis_events.k8s.io_v1.json", document(paths, schemas, core["components"]["securitySchemes"]))


autoscaling_v1()
events_v1()
