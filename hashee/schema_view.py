"""/api/schema/ as a browser shows it: JSON by default, YAML on request.

drf-spectacular answers YAML as ``application/vnd.oai.openapi`` by default, a type browsers
do not display, so opening the link downloaded a file. JSON as ``application/json`` shows
inline; ``?format=yaml`` or ``Accept: application/vnd.oai.openapi`` still give YAML.
"""

from __future__ import annotations

from drf_spectacular.renderers import (
    OpenApiJsonRenderer,
    OpenApiJsonRenderer2,
    OpenApiYamlRenderer,
    OpenApiYamlRenderer2,
)
from drf_spectacular.views import SpectacularAPIView


class PlainJsonRenderer(OpenApiJsonRenderer):
    media_type = "application/json"


class SchemaView(SpectacularAPIView):
    renderer_classes = [PlainJsonRenderer, OpenApiJsonRenderer, OpenApiJsonRenderer2, OpenApiYamlRenderer,
                        OpenApiYamlRenderer2]
