"""pyctrl's Kubernetes client: configuration, typed objects, the verbs, watch, fake client.

Mirrors controller-runtime ``pkg/client`` (+ ``pkg/client/config``, ``pkg/client/fake``,
``pkg/client/apiutil``) and the client-go pieces underneath. Modules, one concept each:

- ``config``      -- kubeconfig / in-cluster configuration (``load_config``)
- ``rest``        -- the HTTP transport: session, retries, rate limit, ``rest_client_requests_total``
- ``errors``      -- the exception hierarchy (apiserver ``Status`` → typed errors)
- ``gvk``, ``scheme``, ``restmapper`` -- kinds, the type registry and codec, discovery mapping
- ``objects``     -- typed built-in kinds and the ``KubeObject`` base for CRDs
- ``selectors``   -- label and field selectors
- ``patch``       -- patch types (``MergeFrom``, ``RawPatch``) and appliers
- ``options``     -- the verbs' option objects (``ListOptions``, ``PatchOptions``…), parsed once
- ``interfaces``  -- the ``Reader``/``Writer``/``StatusWriter``/``Client`` protocols and the bases
  that turn keywords into option objects for the implementations' primitives
- ``client``      -- ``ApiClient``, the apiserver implementation (``transport=`` is its seam)
- ``subresource`` -- requests on an object's URL: its writes, ``status()`` and ``subresource()``
- ``watch``       -- watch events and the raw list/watch source of informers
- ``split``       -- ``SplitClient``: reads from the informer cache, writes to the apiserver
- ``fake``        -- ``FakeClient``: in-memory implementation for unit tests
"""

from pyctrl.client.client import ApiClient
from pyctrl.client.config import Config, load_config, load_incluster_config, load_kubeconfig
from pyctrl.client.errors import (
    AlreadyExists,
    ApiError,
    BadRequest,
    CacheError,
    CacheNotStarted,
    CacheSyncTimeout,
    ConfigError,
    Conflict,
    Expired,
    FieldNotIndexed,
    Forbidden,
    Gone,
    InternalError,
    Invalid,
    KubernetesError,
    MethodNotAllowed,
    NotAcceptable,
    NotFound,
    RequestEntityTooLarge,
    RequestTimeout,
    ServerTimeout,
    ServiceUnavailable,
    StatusCause,
    TooManyRequests,
    TransportError,
    Unauthorized,
    UnknownKind,
    UnsupportedMediaType,
)
from pyctrl.client.gvk import GroupVersionKind, GroupVersionResource
from pyctrl.client.interfaces import (
    Client,
    ObjectList,
    ObjectWriterBase,
    Reader,
    ReaderBase,
    StatusWriter,
    SubResourceClient,
    Writer,
    WriterBase,
)
from pyctrl.client.objects import (
    ConfigMap,
    Event,
    Job,
    KubeModel,
    KubeObject,
    LabelSelector,
    Lease,
    Namespace,
    ObjectMeta,
    OwnerReference,
    PartialObjectMetadata,
    PersistentVolumeClaim,
    Pod,
    PodDisruptionBudget,
    Scale,
    Secret,
    Service,
    StatefulSet,
)
from pyctrl.client.options import (
    CreateOptions,
    DeleteAllOfOptions,
    DeleteOptions,
    GetOptions,
    ListOptions,
    PatchOptions,
    Preconditions,
    PropagationPolicy,
    UpdateOptions,
)
from pyctrl.client.patch import Apply, MergeFrom, Patch, PatchType, RawPatch
from pyctrl.client.rest import HTTPRequest, HTTPTransport, Transport
from pyctrl.client.restmapper import DiscoveryRESTMapper, RESTMapper, RESTMapping, StaticRESTMapper
from pyctrl.client.scheme import Kind, Object, Scheme, default_scheme
from pyctrl.client.selectors import FieldSelector, Selector
from pyctrl.client.split import SplitClient
from pyctrl.client.watch import ListerWatcher, RawEvent, RawList, WatchEvent

__all__ = [
    "AlreadyExists",
    "ApiClient",
    "ApiError",
    "Apply",
    "BadRequest",
    "CacheError",
    "CacheNotStarted",
    "CacheSyncTimeout",
    "Client",
    "Config",
    "ConfigError",
    "ConfigMap",
    "Conflict",
    "CreateOptions",
    "DeleteAllOfOptions",
    "DeleteOptions",
    "DiscoveryRESTMapper",
    "Event",
    "Expired",
    "FieldNotIndexed",
    "FieldSelector",
    "Forbidden",
    "GetOptions",
    "Gone",
    "GroupVersionKind",
    "GroupVersionResource",
    "HTTPRequest",
    "HTTPTransport",
    "InternalError",
    "Invalid",
    "Job",
    "Kind",
    "KubeModel",
    "KubeObject",
    "KubernetesError",
    "LabelSelector",
    "Lease",
    "ListOptions",
    "ListerWatcher",
    "MergeFrom",
    "MethodNotAllowed",
    "Namespace",
    "NotAcceptable",
    "NotFound",
    "Object",
    "ObjectList",
    "ObjectMeta",
    "ObjectWriterBase",
    "OwnerReference",
    "PartialObjectMetadata",
    "Patch",
    "PatchOptions",
    "PatchType",
    "PersistentVolumeClaim",
    "Pod",
    "PodDisruptionBudget",
    "Preconditions",
    "PropagationPolicy",
    "RESTMapper",
    "RESTMapping",
    "RawEvent",
    "RawList",
    "RawPatch",
    "Reader",
    "ReaderBase",
    "RequestEntityTooLarge",
    "RequestTimeout",
    "Scale",
    "Scheme",
    "Secret",
    "Selector",
    "ServerTimeout",
    "Service",
    "ServiceUnavailable",
    "SplitClient",
    "StatefulSet",
    "StaticRESTMapper",
    "StatusCause",
    "StatusWriter",
    "SubResourceClient",
    "TooManyRequests",
    "Transport",
    "TransportError",
    "Unauthorized",
    "UnknownKind",
    "UnsupportedMediaType",
    "UpdateOptions",
    "WatchEvent",
    "Writer",
    "WriterBase",
    "default_scheme",
    "load_config",
    "load_incluster_config",
    "load_kubeconfig",
]
