"""Opt-in Khronos validation: ``MNNPY_VULKAN_VALIDATION=1`` before the first Vulkan use.

When set and the layer ``VK_LAYER_KHRONOS_validation`` is installed (Debian
``vulkan-validationlayers``), the instance is created with it, with synchronization
validation enabled (``VkValidationFeaturesEXT``: missing or wrong barriers are reported),
and a ``VK_EXT_debug_utils`` messenger writes every warning and error message to stderr
(``mnnpy vulkan validation error: ...``) and collects it into ``probe().messages`` (a list of
strings, which the tests read). Set without the layer installed: a ``RuntimeWarning`` says
so. Costs time, off by default.

Source: Vulkan 1.3 specification, "Debugging" (``VK_EXT_debug_utils``) and the
``VK_EXT_validation_features`` extension.
"""

from __future__ import annotations

import os
import sys
from typing import Any

VALIDATION_ENV = "MNNPY_VULKAN_VALIDATION"
LAYER = "VK_LAYER_KHRONOS_validation"


def requested() -> bool:
    """Whether ``$MNNPY_VULKAN_VALIDATION`` asks for validation."""
    return os.environ.get(VALIDATION_ENV, "") not in ("", "0")


def layer_available(vk) -> bool:
    """Whether the Khronos validation layer is installed."""
    try:
        return any(str(p.layerName) == LAYER for p in vk.vkEnumerateInstanceLayerProperties())
    except Exception:  # noqa: BLE001 - no layer information: no validation
        return False


def instance_options(vk) -> tuple[list[str], list[str], Any]:
    """``(layers, extensions, pNext)`` for ``VkInstanceCreateInfo``: synchronization validation on."""
    features = vk.VkValidationFeaturesEXT(
        pEnabledValidationFeatures=[vk.VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT]
    )
    return [LAYER], [vk.VK_EXT_DEBUG_UTILS_EXTENSION_NAME], features


def install_messenger(vk, instance, messages: list[str]):
    """A debug-utils messenger appending ``"<severity>: <message>"`` for warnings and errors
    to ``messages`` and printing it to stderr; returns the messenger (kept alive by the caller)."""
    severity = vk.VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | vk.VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT
    kinds = (
        vk.VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT
        | vk.VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT
        | vk.VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT
    )

    def callback(sev, kind, data, user):
        level = "error" if sev & vk.VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT else "warning"
        text = f"{level}: {vk.ffi.string(data.pMessage).decode(errors='replace')}"
        messages.append(text)
        print(f"mnnpy vulkan validation {text}", file=sys.stderr, flush=True)
        return 0

    info = vk.VkDebugUtilsMessengerCreateInfoEXT(messageSeverity=severity, messageType=kinds, pfnUserCallback=callback)
    create = vk.vkGetInstanceProcAddr(instance, "vkCreateDebugUtilsMessengerEXT")
    return create(instance, info, None)
