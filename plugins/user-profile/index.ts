import { asClass } from 'awilix';
import { definePlugin } from '../../core/plugin/define.ts';
import * as operations from './operations.ts';
import { PROFILE_PICTURE, PROFILE_PICTURE_LIMITS, UserProfileService } from './user-profile.service.ts';

declare module '../../core/container.ts' {
  interface Cradle {
    userProfileService: UserProfileService;
  }
}

/** UserProfileRpc: the logged-in user's own profile, password and picture. The user record lives in core/auth. */
export const userProfilePlugin = definePlugin({
  id: 'user-profile',
  group: 'UserProfileRpc',
  coreVersion: '^1.0.0',
  // Channel verification uses the auth plugin's one-time codes.
  dependsOn: ['auth'],
  services: { userProfileService: asClass(UserProfileService).singleton() },
  operations,
  start: ({ uploadService }) => uploadService.definePurpose(PROFILE_PICTURE, PROFILE_PICTURE_LIMITS),
});
