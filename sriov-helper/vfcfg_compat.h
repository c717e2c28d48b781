/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The kernel differences sriov_vfcfg meets, behind two helpers.  Kbuild
 * probes the headers and defines VFCFG_DEVICE_DRIVER_OVERRIDE when the
 * driver override lives in struct device (with its own spinlock) rather
 * than in struct pci_dev (guarded by the device lock).
 */
#ifndef VFCFG_COMPAT_H
#define VFCFG_COMPAT_H

#include <linux/device.h>
#include <linux/pci.h>
#include <linux/string.h>

#ifdef VFCFG_DEVICE_DRIVER_OVERRIDE

static inline bool vfcfg_override_is(struct pci_dev *pdev, const char *name)
{
	bool ret;

	spin_lock(&pdev->dev.driver_override.lock);
	ret = pdev->dev.driver_override.name &&
	      !strcmp(pdev->dev.driver_override.name, name);
	spin_unlock(&pdev->dev.driver_override.lock);
	return ret;
}

static inline int vfcfg_override_set(struct pci_dev *pdev, const char *name)
{
	return device_set_driver_override(&pdev->dev, name);
}

#else

static inline bool vfcfg_override_is(struct pci_dev *pdev, const char *name)
{
	bool ret;

	device_lock(&pdev->dev);
	ret = pdev->driver_override && !strcmp(pdev->driver_override, name);
	device_unlock(&pdev->dev);
	return ret;
}

static inline int vfcfg_override_set(struct pci_dev *pdev, const char *name)
{
	return driver_set_override(&pdev->dev, &pdev->driver_override, name,
				   strlen(name));
}

#endif

#endif /* VFCFG_COMPAT_H */
